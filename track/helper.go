package track

import (
	"fmt"
	"maps"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tensorlife/tensorlife/internal/fpstack"
)

// Helper frames. Services allocate through helpers of their own
// (newKV(ctx, alloc, n) called from prefill, decode and a session cache);
// naming the helper in every report hides the caller whose tensors leak. A
// helper marks itself with Helper, as a test helper calls testing.T.Helper,
// and a tracker marks helpers the user cannot edit with the HelperFunctions
// option. Reports then name the first frame that is neither tensorlife's nor
// a helper's (Site.Location).
//
// Marks are kept by function name, not entry PC: an inlined helper has no
// entry of its own, and a name is what HelperFunctions gives too. Helper
// caches the PC it was called from, so a helper's repeated calls cost a
// one-frame walk and a lookup. Marks are process-wide and never removed;
// each new one bumps helperGen, which tells sites symbolized before it to
// compute their headline again.

// helperMarks holds the functions marked by Helper.
var helperMarks struct {
	seen  sync.Map // PC of a Helper call -> struct{}: calls already marked
	mu    sync.Mutex
	names atomic.Pointer[map[string]struct{}] // copied on write under mu
	gen   atomic.Uint64                       // bumped by each new name
}

// maxHelperMarks bounds the functions Helper marks: a program has a few
// helpers, and a bound keeps a Helper called from generated code in a loop
// from growing the set without end. Calls past it are ignored.
const maxHelperMarks = 4096

// Helper marks the calling function as an allocation helper, as
// testing.T.Helper does: reports name its caller instead. Process-wide.
//
//	func newKV(ctx context.Context, a tensor.Allocator, n int) (*tensor.Tensor, error) {
//		track.Helper()
//		return tensor.New(ctx, a, tensor.Float16, 2, n, 128)
//	}
//
//go:noinline
func Helper() {
	var pc [1]uintptr
	if n, _ := fpstack.Capture(1, pc[:]); n == 0 {
		return
	}
	if _, ok := helperMarks.seen.Load(pc[0]); ok {
		return
	}
	markHelperPC(pc[0])
}

// markHelperPC marks the function whose code holds the return address pc.
// pc is remembered as seen whether or not it marked anything (a frame of no
// name, a call past maxHelperMarks): later calls from it return at the
// lookup instead of symbolizing again. Seen PCs are bounded by the Helper
// calls in the program's code.
func markHelperPC(pc uintptr) {
	f, _ := runtime.CallersFrames([]uintptr{pc}).Next()
	if f.Function == "" {
		helperMarks.seen.Store(pc, struct{}{})
		return
	}
	helperMarks.mu.Lock()
	defer helperMarks.mu.Unlock()
	old := helperMarks.names.Load()
	if old != nil {
		_, ok := (*old)[f.Function]
		if ok || len(*old) >= maxHelperMarks {
			helperMarks.seen.Store(pc, struct{}{})
			return
		}
	}
	names := map[string]struct{}{}
	if old != nil {
		names = maps.Clone(*old)
	}
	names[f.Function] = struct{}{}
	helperMarks.names.Store(&names)
	helperMarks.seen.Store(pc, struct{}{})
	helperMarks.gen.Add(1)
}

// markedByHelper reports whether fn called Helper.
func markedByHelper(fn string) bool {
	names := helperMarks.names.Load()
	if names == nil {
		return false
	}
	_, ok := (*names)[fn]
	return ok
}

// helperRules are the helpers a tracker was told of (HelperFunctions).
type helperRules struct {
	exact    map[string]struct{}
	prefixes []string
}

func (h *helperRules) match(fn string) bool {
	if h == nil {
		return false
	}
	if _, ok := h.exact[fn]; ok {
		return true
	}
	for _, p := range h.prefixes {
		if strings.HasPrefix(fn, p) {
			return true
		}
	}
	return false
}

// Bounds of HelperFunctions.
const (
	// maxHelperFunctions bounds the names one tracker is given: each frame
	// of a report is matched against every prefix.
	maxHelperFunctions = 256
	// maxHelperName bounds one name's length.
	maxHelperName = 1024
)

// HelperFunctions marks functions as allocation helpers, as if each called
// Helper: "pkg/path.fn", "pkg/path.(*T).m", or a prefix ending in "." or "/".
// At most 256 names of up to 1024 bytes.
func HelperFunctions(names ...string) Option {
	names = append([]string(nil), names...) // the caller may reuse its slice
	return optionFunc(func(c *config) error {
		// Each New starts from no rules, so several HelperFunctions of one
		// New add to the rules this New made, and nothing else shares them.
		rules := c.helpers
		if rules == nil {
			rules = &helperRules{exact: make(map[string]struct{})}
		}
		for _, n := range names {
			if n == "" || len(n) > maxHelperName || strings.ContainsAny(n, " \t\n") {
				return fmt.Errorf("%w: HelperFunctions(%q): want a function or package name without spaces, 1..%d bytes",
					ErrInvalidOption, n, maxHelperName)
			}
			if strings.HasSuffix(n, ".") || strings.HasSuffix(n, "/") {
				rules.prefixes = append(rules.prefixes, n)
			} else {
				rules.exact[n] = struct{}{}
			}
		}
		if len(rules.exact)+len(rules.prefixes) > maxHelperFunctions {
			return fmt.Errorf("%w: HelperFunctions with %d names in all: want at most %d",
				ErrInvalidOption, len(rules.exact)+len(rules.prefixes), maxHelperFunctions)
		}
		c.helpers = rules
		return nil
	})
}

// isHelperFrame reports whether f is a marked helper's, by Helper or rules.
func isHelperFrame(f Frame, rules *helperRules) bool {
	return markedByHelper(f.Function) || rules.match(f.Function)
}
