package invariants

import "fmt"

// Recover runs f and returns its error, or, when f panics with an error as
// invariant checks do, that error and panicked true. Tests of misuse use it
// to check one behaviour in both builds: the error returned without
// invariants, the same error raised as a panic with them.
func Recover(f func() error) (err error, panicked bool) {
	defer func() {
		if r := recover(); r != nil {
			panicked = true
			if e, ok := r.(error); ok {
				err = e
				return
			}
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f(), false
}
