package oomdump

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"

	"github.com/tensorlife/tensorlife/timeline"
)

func TestFileName(t *testing.T) {
	at := time.Date(2025, 3, 14, 10, 26, 53, 120_456_789, time.FixedZone("CET", 3600))
	for _, tt := range []struct{ tracker, want string }{
		{"agentleak", "agentleak-oom-20250314T092653.120Z-3"},
		{"a/b c:d", "a_b_c_d-oom-20250314T092653.120Z-3"},
		{"..", "tensorlife-oom-20250314T092653.120Z-3"},
		{"", "tensorlife-oom-20250314T092653.120Z-3"},
		{"ünï", "_n_-oom-20250314T092653.120Z-3"},
	} {
		assert.Equal(t, tt.want, fileName(tt.tracker, at, 3), "tracker %q", tt.tracker)
	}
}

// TestLongTrackerNamesFit guards the file names and the timeline's title
// against long tracker names: cut at a character boundary, with a hash of
// the whole name, so both fit and two long names that share their start
// still differ.
func TestLongTrackerNamesFit(t *testing.T) {
	at := time.Date(2025, 3, 14, 10, 26, 53, 120_456_789, time.UTC)
	long := strings.Repeat("n", 240)
	other := long + "x"
	wide := strings.Repeat("ü", 300) // 600 bytes
	for _, name := range []string{long, other, wide, strings.Repeat("a", 199), strings.Repeat("a", 200), strings.Repeat("z", 1<<16)} {
		fn := fileName(name, at, 1<<62)
		assert.LessOrEqual(t, len(fn+".summary.txt"), 255, "file name of a %d-byte tracker name", len(name))
		assert.LessOrEqual(t, len(fn), len("-oom-20250314T092653.120Z-")+maxNameBytes+19)
		ti := title(name, at)
		assert.LessOrEqual(t, len(ti), timeline.MaxTitle, "title of a %d-byte tracker name", len(name))
		assert.True(t, utf8.ValidString(ti), "cut at a character boundary")
		assert.True(t, strings.HasSuffix(ti, ": out of memory at 2025-03-14T10:26:53Z"), ti)
	}
	assert.NotEqual(t, fileName(long, at, 1), fileName(other, at, 1), "the hash tells long names apart")
	assert.NotEqual(t, title(long, at), title(other, at))
	assert.Equal(t, fileName(long, at, 1), fileName(long, at, 1), "and is the same for one name")
	assert.True(t, strings.HasPrefix(fileName(long, at, 1), strings.Repeat("n", 80)), "the start of the name is kept")
	short := strings.Repeat("s", maxNameBytes)
	assert.Equal(t, short+"-oom-20250314T102653.120Z-1", fileName(short, at, 1), "a name that fits is kept whole")
	assert.Equal(t, "svc: out of memory at 2025-03-14T10:26:53Z", title("svc", at))
}
