package retainers

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrBusy means the dump was not written because goroutines were in system
// calls or cgo calls (or were marked leaked): on Go 1.26 the dump can crash
// the process when one returns while it runs (see the package
// documentation). A *BusyError names them.
var ErrBusy = errors.New("retainers: goroutines are in system calls")

// BusyError lists the goroutines that kept the dump from being written.
type BusyError struct {
	// Goroutines describe each one: "goroutine 7 [syscall]: main.spin".
	Goroutines []string
	// Waited is how long the search waited for them to settle.
	Waited time.Duration
}

func (e *BusyError) Error() string {
	shown := e.Goroutines
	more := ""
	if len(shown) > 3 {
		shown, more = shown[:3], fmt.Sprintf(" and %d more", len(e.Goroutines)-3)
	}
	return fmt.Sprintf("retainers: heap dump not written: %d goroutines were in system calls or cgo calls "+
		"for %v (%s%s); on %s a heap dump can crash the process when one leaves a system call",
		len(e.Goroutines), e.Waited.Round(time.Millisecond), strings.Join(shown, "; "), more, runtime.Version())
}

// Is reports whether target is ErrBusy.
func (e *BusyError) Is(target error) bool { return target == ErrBusy }

// goroutineSample is one goroutine as a traceback shows it.
type goroutineSample struct {
	id    uint64
	state string // the word in brackets: "syscall", "chan receive"
	// funcs are the stack's function lines, innermost first.
	funcs  string
	leaked bool
}

// sampleGoroutines reads every goroutine but the caller's from a
// traceback of all goroutines (runtime.Stack), at most limit bytes.
func sampleGoroutines(limit int) ([]goroutineSample, error) {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		if len(buf) >= limit {
			return nil, fmt.Errorf("retainers: the goroutines' traceback is over %d bytes", limit)
		}
		buf = make([]byte, 2*len(buf))
	}
	return parseTraceback(buf), nil
}

// parseTraceback parses runtime.Stack's text; the first goroutine, the
// caller's, is left out.
func parseTraceback(buf []byte) []goroutineSample {
	var out []goroutineSample
	first := true
	for _, block := range bytes.Split(buf, []byte("\n\n")) {
		header, rest, _ := bytes.Cut(block, []byte("\n"))
		h := string(header)
		if !strings.HasPrefix(h, "goroutine ") {
			continue
		}
		if first {
			first = false
			continue
		}
		idText, after, ok := strings.Cut(h[len("goroutine "):], " ")
		id, err := strconv.ParseUint(idText, 10, 64)
		if !ok || err != nil {
			continue
		}
		open := strings.IndexByte(after, '[')
		end := strings.LastIndexByte(after, ']')
		if open < 0 || end < open {
			continue
		}
		inside := after[open+1 : end]
		state, _, _ := strings.Cut(inside, ",")
		s := goroutineSample{id: id, state: strings.TrimSpace(state), leaked: strings.Contains(inside, "(leaked)")}
		var funcs []string
		for _, line := range strings.Split(string(rest), "\n") {
			if line == "" || line[0] == '\t' || strings.HasPrefix(line, "created by ") {
				continue
			}
			if i := strings.LastIndexByte(line, '('); i > 0 {
				line = line[:i] // the arguments
			}
			funcs = append(funcs, line)
		}
		s.funcs = strings.Join(funcs, "\n")
		out = append(out, s)
	}
	return out
}

// syscallFrames are functions whose presence on a stack says the goroutine
// is in, or around, a system call or a cgo call.
var syscallFrames = []string{"syscall.Syscall", "syscall.Syscall6", "syscall.RawSyscall", "syscall.RawSyscall6",
	"syscall.syscall", "syscall.rawSyscallNoError", "internal/runtime/syscall", "runtime.cgocall",
	"runtime.entersyscall", "runtime.exitsyscall", "runtime.asmcgocall"}

// inSyscallCode reports whether a stack shows a system call or cgo frame.
func inSyscallCode(funcs string) bool {
	for _, f := range syscallFrames {
		if strings.Contains(funcs, f) {
			return true
		}
	}
	return false
}

// parkedWaits are functions whose goroutines sit in a system call that
// ends only on an event a dump cannot be racing with in a test: os/signal's
// goroutine, which leaves its wait when a signal arrives.
var parkedWaits = []string{"os/signal.signal_recv"}

// busyGoroutines takes samples tracebacks gap apart and returns the
// goroutines seen in a system call or a cgo call, in their code, or running
// (other than the caller), in any sample: any of them may leave its call
// while a dump runs. Goroutines in parkedWaits are let be.
//
// A goroutine looping on short system calls and one blocked in a long one
// look alike in tracebacks (the same state, the same stack: under CPU
// contention the loop's thread is descheduled in the kernel), so both keep
// the dump from being written: a blocked read or a process wait can return
// during the dump as surely as a loop can.
func busyGoroutines(samples int, gap time.Duration, limit int) (busy []string, leaked bool, err error) {
	last := make(map[uint64]goroutineSample)
	hit := make(map[uint64]bool)
	for i := range samples {
		if i > 0 {
			time.Sleep(gap)
		}
		gs, err := sampleGoroutines(limit)
		if err != nil {
			return nil, false, err
		}
		for _, g := range gs {
			leaked = leaked || g.leaked
			touched := g.state == "syscall" || g.state == "running" || inSyscallCode(g.funcs) || g.leaked
			if !touched || parked(g.funcs) {
				continue
			}
			if !hit[g.id] || g.state == "syscall" {
				last[g.id] = g // the sample that shows why
			}
			hit[g.id] = true
		}
	}
	ids := make([]uint64, 0, len(hit))
	for id := range hit {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		g := last[id]
		top, _, _ := strings.Cut(g.funcs, "\n")
		busy = append(busy, fmt.Sprintf("goroutine %d [%s]: %s", id, g.state, userFrame(g.funcs, top)))
	}
	return busy, leaked, nil
}

// parked reports whether a stack is one of parkedWaits'.
func parked(funcs string) bool {
	for _, f := range parkedWaits {
		if strings.Contains(funcs, f) {
			return true
		}
	}
	return false
}

// userFrame returns the innermost function of a stack outside the runtime
// and package syscall, for naming a busy goroutine; top if none.
func userFrame(funcs, top string) string {
	for _, f := range strings.Split(funcs, "\n") {
		pkg, _ := splitFuncName(f)
		if pkg != "runtime" && pkg != "syscall" && !strings.HasPrefix(pkg, "internal/") {
			return f
		}
	}
	return top
}

// waitQuiet waits up to maxWait for no goroutine to be in a system call or
// a cgo call, sampling a few tracebacks at a time; it returns a *BusyError
// if some still are.
func waitQuiet(maxWait time.Duration) error {
	const (
		samples = 4
		gap     = 2 * time.Millisecond
		limit   = 64 << 20
	)
	start := time.Now()
	for {
		busy, leaked, err := busyGoroutines(samples, gap, limit)
		if err != nil {
			return err
		}
		if len(busy) == 0 {
			return nil
		}
		waited := time.Since(start)
		if leaked || waited >= maxWait {
			return &BusyError{Goroutines: busy, Waited: waited}
		}
		time.Sleep(min(5*time.Millisecond, maxWait-waited))
	}
}
