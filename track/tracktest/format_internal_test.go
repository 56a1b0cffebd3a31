package tracktest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestFormatAge(t *testing.T) {
	tests := []struct {
		age  time.Duration
		want string
	}{
		{0, "<1ms"},
		{999 * time.Microsecond, "<1ms"},
		{12*time.Millisecond + 400*time.Microsecond, "12ms"},
		{1234 * time.Millisecond, "1.2s"},
		{59*time.Second + 940*time.Millisecond, "59.9s"},
		{2*time.Minute + 3400*time.Millisecond, "2m3s"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			assert.Equal(t, tt.want, formatAge(tt.age))
		})
	}
}

func TestLeakStateString(t *testing.T) {
	assert.Equal(t, "live", Live.String())
	assert.Equal(t, "dropped without Free (found by the garbage collector)", Dropped.String())
	assert.Equal(t, "LeakState(9)", LeakState(9).String())
}

func TestEntryNames(t *testing.T) {
	for e, want := range map[entry]string{entryFind: "Find", entryVerifyNone: "VerifyNone",
		entryTestMain: "VerifyTestMain", entryContext: "Context"} {
		assert.Equal(t, want, e.String())
	}
}
