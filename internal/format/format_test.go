package format

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestBytes(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {-1023, "-1023 B"}, {1024, "1 KiB"}, {1536, "1.5 KiB"},
		{16 << 20, "16 MiB"}, {-(3 << 30), "-3 GiB"}, {math.MaxInt64, "8 EiB"}, {math.MinInt64, "-8 EiB"},
	} {
		assert.Equal(t, tc.want, Bytes(tc.n), "Bytes(%d)", tc.n)
	}
}

func TestByteUnit(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		size float64
		name string
	}{
		{0, 1, "B"}, {1023, 1, "B"}, {1024, 1 << 10, "KiB"}, {900 << 20, 1 << 20, "MiB"},
		{1 << 30, 1 << 30, "GiB"}, {math.MaxInt64, 1 << 60, "EiB"}, {math.MaxFloat64, 1 << 60, "EiB"},
	} {
		size, name := ByteUnit(tc.v)
		assert.Equal(t, tc.size, size, "ByteUnit(%g)", tc.v)
		assert.Equal(t, tc.name, name, "ByteUnit(%g)", tc.v)
	}
}

func TestAge(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "<1ms"}, {0, "<1ms"}, {1500 * time.Microsecond, "2ms"},
		{1234 * time.Millisecond, "1.2s"}, {90*time.Second + 400*time.Millisecond, "1m30s"},
	} {
		assert.Equal(t, tc.want, Age(tc.d), "Age(%v)", tc.d)
	}
}

func TestShape(t *testing.T) {
	assert.Equal(t, "[]", Shape(nil))
	assert.Equal(t, "[2 3 4]", Shape([]int{2, 3, 4}))
}

func TestWriteSites(t *testing.T) {
	var b strings.Builder
	WriteSites(&b, "top live sites", nil)
	assert.Empty(t, b.String(), "no sites, no title")
	WriteSites(&b, "top live sites", []SiteLine{
		{Function: "main.decode", File: "/src/a.go", Line: 7, Count: 1, Bytes: 2048,
			Via: Via("main.step", "/src/a.go", 3), Held: []string{HeldBy("a View made at a.go:9 (main.decode)", 2)}},
		{Function: "main.prefill", File: "/src/b.go", Line: 3, Count: 2, Bytes: 512},
	})
	assert.Equal(t, "\n  top live sites:"+
		"\n  1. 2 KiB in 1 tensor: main.decode\n       /src/a.go:7\n       via main.step (a.go:3)"+
		"\n       held by a View made at a.go:9 (main.decode), 2 handles"+
		"\n  2. 512 B in 2 tensors: main.prefill\n       /src/b.go:3", b.String())
}

func TestHeldBy(t *testing.T) {
	assert.Equal(t, "held by a Retain made at c.go:4 (main.keep)", HeldBy("a Retain made at c.go:4 (main.keep)", 1))
	assert.Equal(t, "held by a View made at c.go:5 (main.f), 3 handles", HeldBy("a View made at c.go:5 (main.f)", 3))
}

func TestFunction(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"main.main", "main.main"},
		{"github.com/tensorlife/tensorlife/examples/agentleak.(*agent).rebuildMask", "agentleak.(*agent).rebuildMask"},
		{"example.com/m/pkg.Map[go.shape.*example.com/x.T]", "pkg.Map[go.shape.*example.com/x.T]"},
		{"example.com/m/pkg.Map[...]", "pkg.Map[...]"},
		{"", ""},
	} {
		assert.Equal(t, tc.want, Function(tc.in), "Function(%q)", tc.in)
	}
}

func TestFile(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/src/x/a.go", "a.go"}, {"a.go", "a.go"}, {"", ""},
	} {
		assert.Equal(t, tc.want, File(tc.in), "File(%q)", tc.in)
	}
}

func TestForecast(t *testing.T) {
	for d, want := range map[time.Duration]string{
		2*time.Hour + 10*time.Minute + 20*time.Second: "runs out in ~2h10m at 12 KiB/s",
		3*time.Minute + 4200*time.Millisecond:         "runs out in ~3m4s at 12 KiB/s",
		1500 * time.Millisecond:                       "runs out in ~1.5s at 12 KiB/s",
	} {
		assert.Equal(t, want, Forecast(d, 12<<10), d.String())
	}
}

func TestWrap(t *testing.T) {
	var b strings.Builder
	Wrap(&b, "  do: ", "free it on the path named or hand it to an owner", 24)
	assert.Equal(t, "  do: free it on the\n      path named or hand\n      it to an owner\n", b.String())
}

// A part below its whole never reads as much as the whole.
func TestBytesOf(t *testing.T) {
	tests := []struct {
		part, whole int64
		want        string
	}{
		{256<<20 - 27<<10 - 512, 256 << 20, "255.9 MiB"},
		{48 << 20, 64 << 20, "48 MiB"},
		{64 << 20, 64 << 20, "64 MiB"},
		{1000, 1010, "1000 B"},
		{4<<10 - 1, 4 << 10, "3.9 KiB"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, BytesOf(tt.part, tt.whole), "%d of %d", tt.part, tt.whole)
	}
}
