package tensortest

import (
	"errors"
	"fmt"
	"math"

	"github.com/tensorlife/tensorlife/internal/option"
)

// FaultOption chooses what a Faulty injects. Options are validated in NewFaulty; an
// invalid one is an error matching ErrInvalidOption.
type FaultOption interface {
	apply(*faultConfig) error
}

type faultOptionFunc func(*faultConfig) error

func (f faultOptionFunc) apply(c *faultConfig) error { return f(c) }

type faultConfig struct {
	failNth     map[int64]bool
	fraction    float64
	fractionSet bool
	seed        uint64
	oom         bool
}

// FailNth fails the nth call to Alloc (counting from 1, failed calls
// included). Give it several times to fail several calls: FailNth(2),
// FailNth(3) fails the second and third.
func FailNth(n int64) FaultOption {
	return faultOptionFunc(option.AtLeast("FailNth", n, 1, func(c *faultConfig, n int64) { c.failNth[n] = true }))
}

// FailFraction fails each call to Alloc with probability f, drawn from a
// generator seeded with seed, so a failing run can be replayed: the same
// seed and the same sequence of calls fail the same calls. f must be in
// [0, 1]; FailFraction may be given once.
func FailFraction(f float64, seed uint64) FaultOption {
	return faultOptionFunc(func(c *faultConfig) error {
		if math.IsNaN(f) || f < 0 || f > 1 {
			return fmt.Errorf("FailFraction(%v): want 0 <= f <= 1", f)
		}
		if c.fractionSet {
			return errors.New("FailFraction given twice")
		}
		c.fraction, c.seed, c.fractionSet = f, seed, true
		return nil
	})
}

// WithoutOOM makes injected allocation failures match only ErrInjected, not
// tensor.ErrOutOfMemory: a driver error that is not exhaustion, which an
// allocator must pass on rather than retry.
func WithoutOOM() FaultOption {
	return faultOptionFunc(option.Set(false, func(c *faultConfig, oom bool) { c.oom = oom }))
}
