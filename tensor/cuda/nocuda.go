//go:build !cuda

package cuda

import (
	"fmt"

	"github.com/tensorlife/tensorlife/tensor"
)

// Enabled reports whether this binary was built with CUDA support (the cuda
// build tag). When it is false, Open always fails.
const Enabled = false

// errNotBuilt says what a binary without the cuda tag lacks and how to get it.
var errNotBuilt = fmt.Errorf("%w: this binary was built without CUDA support; "+
	`build with -tags cuda after eval "$(scripts/cuda-env.sh)" (see the documentation of package tensor/cuda)`,
	tensor.ErrNoDevice)

// Open would open the CUDA device with the given ordinal, but this binary was
// built without the cuda build tag: it checks opts and returns an error that
// matches tensor.ErrNoDevice and says how to build with CUDA. Programs that
// can run without a GPU fall back to tensor.NewHostDevice on that error.
func Open(ordinal int, opts ...Option) (*Device, error) {
	if _, err := newConfig(opts); err != nil {
		return nil, err
	}
	return nil, &tensor.DeviceError{Op: "open", Device: fmt.Sprintf("cuda:%d", ordinal), Err: errNotBuilt}
}
