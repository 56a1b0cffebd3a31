package timeline

import (
	"encoding/json"
	"encoding/xml"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
)

func TestHumanUnits(t *testing.T) {
	durations := []struct {
		ns   int64
		want string
	}{
		{0, "0 s"}, {999, "999 ns"}, {1500, "1.5 µs"}, {2_500_000, "2.5 ms"}, {1_250_000_000, "1.25 s"},
		{90e9, "90 s"}, {600e9, "10 min"},
	}
	for _, tc := range durations {
		t.Run(tc.want, func(t *testing.T) { assert.Equal(t, tc.want, formatDuration(tc.ns)) })
	}
	assert.Equal(t, "1,000,000", formatCount(1_000_000))
	assert.Equal(t, "-12,345", formatCount(-12345))
	assert.Equal(t, "7", formatCount(7))
}

func TestAxes(t *testing.T) {
	tests := []struct {
		name   string
		ax     axis
		labels []string
	}{
		{"bytes", bytesAxis(900 << 20), []string{"0", "200 MiB", "400 MiB", "600 MiB", "800 MiB", "1000 MiB"}},
		{"few bytes", bytesAxis(3), []string{"0", "1 B", "2 B", "3 B"}},
		{"nothing", bytesAxis(0), []string{"0", "1 B"}},
		{"seconds", timeAxis(0, 9e9), []string{"0", "2 s", "4 s", "6 s", "8 s"}},
		{"window after a drop", timeAxis(12_300e6, 12_800e6), []string{"12300 ms", "12400 ms", "12500 ms", "12600 ms", "12700 ms", "12800 ms"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, v := range tc.ax.ticks() {
				got = append(got, tc.ax.label(v))
			}
			assert.Equal(t, tc.labels, got)
		})
	}
}

func TestShortNames(t *testing.T) {
	assert.Equal(t, "fn (a.go:3)", label(track.Frame{Function: "x/y/fn", File: "/src/x/a.go", Line: 3}))
	assert.Equal(t, "abcd…", truncate("abcdefgh", 5))
	assert.Equal(t, "äöü", truncate("äöü", 3))
	assert.Equal(t, "äö…", truncate("äöüß", 3))
}

func TestEvenTimesDoNotOverflow(t *testing.T) {
	const day = int64(24 * 3600 * 1e9)
	times := evenTimes(5, 5+30*day, MaxSamples)
	require.Len(t, times, MaxSamples)
	assert.EqualValues(t, 5, times[0])
	assert.Equal(t, 5+30*day, times[len(times)-1])
	assert.IsIncreasing(t, times)
}

func TestCompleteAfter(t *testing.T) {
	ev := func(id uint64, at int64) track.Event { return track.Event{ID: id, Time: at} }
	tests := []struct {
		name string
		log  track.HistoryLog
		want int64
	}{
		{"nothing dropped", track.HistoryLog{Events: []track.Event{ev(1, 10), ev(2, 20)}}, -1},
		{
			"complete after the latest dropped event",
			track.HistoryLog{Dropped: 3, DroppedUntil: 25, Events: []track.Event{ev(1, 10), ev(0, 12), ev(2, 30), ev(1, 50)}},
			25,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, completeAfter(&tc.log)) })
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", "q\"uo\\te", "new\nline\t\r\x00\x1f", "ünï\u2028", "bad\xff\xfe", "\xed\xa0\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var got string
		require.NoError(t, json.Unmarshal(appendJSONString(nil, s), &got), "valid JSON for %q", s)
		std, err := json.Marshal(s)
		require.NoError(t, err)
		var want string
		require.NoError(t, json.Unmarshal(std, &want))
		assert.Equal(t, want, got, "decodes as encoding/json's encoding does")
	})
}

func FuzzAppendXML(f *testing.F) {
	for _, s := range []string{"", "a<b>&c", "\"quoted\" 'single'", "ctl\x00\x01\x1f", "tab\tnl\ncr\r", "bad\xff", "\uFFFE\uFFFF"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		esc := string(appendXML(nil, s))
		doc := `<a t="` + esc + `">` + esc + `</a>`
		var v struct {
			T    string `xml:"t,attr"`
			Body string `xml:",chardata"`
		}
		require.NoError(t, xml.Unmarshal([]byte(doc), &v), "well-formed for %q", s)
		assert.Equal(t, v.T, v.Body)
		if isPlainXML(s) {
			assert.Equal(t, s, v.Body, "text that XML allows is kept as it is")
		}
	})
}

// isPlainXML reports whether s holds only characters XML 1.0 allows.
func isPlainXML(s string) bool {
	for _, r := range s {
		if r == 0xFFFD || r == 0xFFFE || r == 0xFFFF || (r < 0x20 && r != '\t' && r != '\n' && r != '\r') {
			return false
		}
	}
	return strings.ToValidUTF8(s, "\uFFFD") == s
}
