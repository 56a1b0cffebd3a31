package oomdump

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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
