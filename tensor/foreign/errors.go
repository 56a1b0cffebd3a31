package foreign

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tensorlife/tensorlife/tensor"
)

var (
	// ErrAlreadyAdopted means Adopt was given memory that overlaps memory
	// another live adoption on the same device holds: releasing both would
	// release it twice. It matches tensor.ErrInvalidPointer too.
	ErrAlreadyAdopted = fmt.Errorf("foreign: memory already adopted: %w", tensor.ErrInvalidPointer)
	// ErrPanic means a Memory.Release panicked; tensorlife recovered the
	// panic. The *PanicError that matches it holds the panic's value and
	// stack, and matches tensor.ErrPanic too, as a panic of the device's
	// methods in Adopt does.
	ErrPanic = errors.New("foreign: release function panicked")
)

// PanicError is a panic that tensorlife recovered from a Memory.Release:
// foreign code must not take the process down. It matches ErrPanic and
// tensor.ErrPanic, and unwraps to the panic's value when that is an error.
type PanicError struct {
	Func  string // what panicked: "Memory.Release"
	Value any    // what was passed to panic
	Stack string // the panicking goroutine's stack, cut at 8 KiB
}

// maxPanicStack bounds the stack a PanicError keeps.
const maxPanicStack = 8 << 10

func (e *PanicError) Error() string {
	return fmt.Sprintf("foreign: %s panicked: %s", e.Func, clipText(fmt.Sprint(e.Value), 256))
}

// Is reports whether target is ErrPanic or tensor.ErrPanic.
func (e *PanicError) Is(target error) bool { return target == ErrPanic || target == tensor.ErrPanic }

// Unwrap returns the panic's value if it is an error, so that a panic with
// a sentinel still matches it.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// clipText cuts s to at most n bytes, saying how long it was: error texts
// never echo unbounded input.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s... (%d bytes)", strings.ToValidUTF8(s[:n], ""), len(s))
}
