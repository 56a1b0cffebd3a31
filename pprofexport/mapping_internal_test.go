package pprofexport

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTextMapping(t *testing.T) {
	const maps = `00400000-0052a000 r-xp 00000000 fd:01 1234                               /srv/bin/agentleak
0052a000-0066e000 r--p 0012a000 fd:01 1234                               /srv/bin/agentleak
55d0c0a00000-55d0c0c2a000 r-xp 00001000 fd:01 99                         /srv/bin/pie binary
7ffd1c9f5000-7ffd1ca16000 rw-p 00000000 00:00 0                          [stack]
garbage line
zz-yy r-xp 0 0 0
`
	tests := []struct {
		name                 string
		pc                   uint64
		start, limit, offset uint64
		ok                   bool
	}{
		{"in the text of a fixed executable", 0x401234, 0x400000, 0x52a000, 0, true},
		{"in the text of a position-independent one", 0x55d0c0a01000, 0x55d0c0a00000, 0x55d0c0c2a000, 0x1000, true},
		{"in data, not executable", 0x52b000, 0, 0, 0, false},
		{"at a limit, which is past the end", 0x52a000, 0, 0, 0, false},
		{"nowhere", 0x10, 0, 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start, limit, offset, ok := textMapping([]byte(maps), tt.pc)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, [3]uint64{tt.start, tt.limit, tt.offset}, [3]uint64{start, limit, offset})
		})
	}
}

// The main mapping names the executable and, on Linux, covers the program
// counters the tracker records.
func TestExecutableMapping(t *testing.T) {
	m := executable()
	exe, err := os.Executable()
	require.NoError(t, err)
	assert.Equal(t, filepath.Base(exe), m.File)
	assert.Less(t, m.Start, m.Limit)
	pc, _, _, ok := runtime.Caller(0)
	require.True(t, ok)
	assert.True(t, m.Start <= uint64(pc) && uint64(pc) < m.Limit, "pc %#x in %#x-%#x", pc, m.Start, m.Limit)
	if runtime.GOOS == "linux" {
		assert.NotEqual(t, ^uint64(0), m.Limit, "the text mapping of /proc/self/maps")
	}
}
