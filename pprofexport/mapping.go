package pprofexport

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"

	"github.com/google/pprof/profile"
)

// fallbackFile names the main mapping when the executable's path is
// unknown.
const fallbackFile = "tensorlife"

// executable is the main mapping of every profile, found once per process:
// the executable does not move while it runs. pprof's web UI heads each
// view with the mapping's file ("File: agentleak"), and reads "unknown"
// where it names none.
//
// The address range matters as much as the name. Where pprof finds a binary
// of that name (in its working directory, or under $PPROF_BINARY_PATH), its
// web source view disassembles the binary around each sample's address:
// with no range (0-0) it cut every address into a range of its own,
// disassembled overlapping ones twice and counted their samples twice (185%
// where -list said 92.7%); with a range that does not say where a
// position-independent executable was loaded, it found no instruction at
// any address and showed nothing. On Linux the range is the executable's
// text mapping as /proc/self/maps lists it, which is where the program
// counters the tracker keeps lie, so the disassembly matches them, as it
// does for a Go heap profile. Elsewhere it is the whole address space, the
// range tools give a mapping they know nothing of, which pprof reads as
// "addresses are the binary's own": right for a position-dependent
// executable; a position-independent one found by pprof shows no
// disassembly there. Where pprof finds no binary, as on a machine that
// only has the profile, every view takes functions and lines from the
// profile, since the mapping says it is symbolized.
var executable = sync.OnceValue(func() profile.Mapping {
	m := profile.Mapping{File: fallbackFile, Limit: ^uint64(0)}
	if exe, err := os.Executable(); err == nil && exe != "" {
		m.File = filepath.Base(exe)
	}
	pc, _, _, ok := runtime.Caller(0)
	if !ok {
		return m
	}
	if maps, err := os.ReadFile("/proc/self/maps"); err == nil {
		if start, limit, offset, ok := textMapping(maps, uint64(pc)); ok {
			m.Start, m.Limit, m.Offset = start, limit, offset
		}
	}
	return m
})

// textMapping finds the executable mapping of /proc/self/maps that holds
// pc, a program counter of this package's code, hence of the executable's
// text: its start, limit and file offset. Lines read
//
//	00400000-0052a000 r-xp 00000000 fd:01 1234   /path/to/binary
func textMapping(maps []byte, pc uint64) (start, limit, offset uint64, ok bool) {
	for line := range bytes.SplitSeq(maps, []byte("\n")) {
		fields := bytes.Fields(line)
		if len(fields) < 3 || !bytes.Contains(fields[1], []byte("x")) {
			continue
		}
		lo, hi, found := bytes.Cut(fields[0], []byte("-"))
		if !found {
			continue
		}
		s, err1 := strconv.ParseUint(string(lo), 16, 64)
		l, err2 := strconv.ParseUint(string(hi), 16, 64)
		o, err3 := strconv.ParseUint(string(fields[2]), 16, 64)
		if err1 != nil || err2 != nil || err3 != nil || s >= l {
			continue
		}
		if s <= pc && pc < l {
			return s, l, o, true
		}
	}
	return 0, 0, 0, false
}
