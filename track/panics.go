package track

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/tensorlife/tensorlife/internal/format"
)

// Calls into code tensorlife does not own. A part's methods (Reserved,
// Headroom, a report source's Stats), a device's and a foreign release
// are other people's code: a panic in one must not escape into the request
// that made the call, nor end the process on a goroutine of tensorlife's
// (a watcher's loop, a releaser). Guard runs such a call under recover; a
// panic is counted on the tracker (Totals.PartPanics), logged once per
// part and method, and the reading goes on without that part's figure.
// docs/ARCHITECTURE.md lists the call points.

// ErrPanic means a call into code tensorlife does not own (a part's or a
// device's method) panicked and the panic was recovered. The *PanicError
// that matches it names the part and the method.
var ErrPanic = errors.New("track: a call into code tensorlife does not own panicked")

// PanicError is a panic recovered from a call into code tensorlife does
// not own. It matches ErrPanic, and unwraps to the panic's value when that
// is an error.
type PanicError struct {
	Part   string // the type of the part called: "*pool.Pool", "*main.device"
	Method string // the method called: "Headroom", "Alloc"
	Value  any    // what was passed to panic
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("track: %s.%s panicked: %s", panicText(e.Part), panicText(e.Method), panicText(e.Value))
}

// panicText renders a panic's value, or a part's or a method's name, as
// valid UTF-8 of at most maxPanicText bytes (format.Value): what errors
// and logs repeat of it.
func panicText(v any) string { return format.Value(v, maxPanicText) }

// Is reports whether target is ErrPanic.
func (e *PanicError) Is(target error) bool { return target == ErrPanic }

// Unwrap returns the panic's value if it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// maxPanicText bounds the panic value (and the part's and method's names)
// that an error or a log line repeats.
const maxPanicText = 256

// Guard calls f, a call of method on part (code tensorlife does not own),
// under recover. It returns nil, or the panic as a *PanicError, which it
// notes on t (NotePanic) unless t is nil (an untracked part's call is only
// recovered). A runtime.Goexit in f ends the goroutine, as it would
// anywhere. Guard costs a deferred call: packages above track call their
// parts' methods through it, on the request path too.
func Guard(t *Tracker, part any, method string, f func()) (err error) {
	defer func() {
		if v := recover(); v != nil {
			pe := &PanicError{Part: fmt.Sprintf("%T", part), Method: method, Value: v}
			if t != nil {
				t.Books().NotePanic(pe.Part, pe.Method, v)
			}
			err = pe
		}
	}()
	f()
	return nil
}

// NotePanic counts a panic v recovered from a call of method on part, code
// tensorlife does not own (Totals.PartPanics), and logs it as an error
// through the tracker's Logger, with the stack of the goroutine that
// recovered it, the first time that part and method panic: a part that
// panics on every tick is logged once, and counted each time. Safe for
// concurrent use; Guard calls it.
func (bk *Books) NotePanic(part, method string, v any) {
	t := (*Tracker)(bk)
	t.panics.count.Add(1)
	if !t.panics.first(part, method) {
		return
	}
	defer func() { _ = recover() }() // a logger's panic is not let through either
	t.cfg.logger.Error("tensorlife: a call into code tensorlife does not own panicked; the reading goes on without it",
		slog.String("tracker", t.cfg.name), slog.String("part", panicText(part)), slog.String("method", panicText(method)),
		slog.String("panic", panicText(v)), slog.String("stack", string(debug.Stack())))
}

// partPanics counts a tracker's recovered panics and remembers which
// part and method have been logged.
type partPanics struct {
	count  atomic.Int64
	mu     sync.Mutex
	logged map[[2]string]bool // at most maxPanicKeys
}

// maxPanicKeys bounds the (part, method) pairs remembered as logged:
// part names are types, few in a program; past the bound a new pair is
// counted and no longer logged.
const maxPanicKeys = 256

// first reports whether part and method panic for the first time, and
// remembers them if so.
func (p *partPanics) first(part, method string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := [2]string{part, method}
	if p.logged[k] || len(p.logged) >= maxPanicKeys {
		return false
	}
	if p.logged == nil {
		p.logged = make(map[[2]string]bool)
	}
	p.logged[k] = true
	return true
}
