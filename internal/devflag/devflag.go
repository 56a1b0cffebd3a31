// Package devflag is the -device flag the example programs share: "host"
// for the host device, Go memory that behaves like a GPU of a given
// capacity, or "cuda:N" for GPU N.
//
//	var spec devflag.Spec                  // the zero Spec is "host"
//	devflag.Var(fs, &spec)                 // -device host|cuda:N
//	...
//	dev, err := devflag.Open(spec, capacity)
//	if err != nil {
//		return err // cuda:N in a binary built without -tags cuda: says how to build it
//	}
//	defer dev.Close()
//
// The capacity means the same on both: the host device's size, or on a GPU
// the most memory the program may take from it (cuda.WithMemoryLimit), so a
// pool budget checked against it holds on either.
package devflag

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/cuda"
)

// ErrInvalidDevice means a -device value is neither "host" nor "cuda:N".
var ErrInvalidDevice = errors.New("devflag: invalid device")

// Usage is the help text of the -device flag.
const Usage = `device to run on: host, the default (Go memory that behaves like a GPU of -capacity bytes), ` +
	`or cuda:N (GPU N, in a binary built with -tags cuda; -capacity caps the memory taken from it)`

// Spec names a device. The zero Spec is the host device.
type Spec struct {
	// CUDA selects GPU Ordinal; false selects the host device.
	CUDA bool
	// Ordinal is the GPU's ordinal, 0 for the first; 0 for the host.
	Ordinal int
}

// Parse reads "host" or "cuda:N" (N from 0). Anything else fails with an
// error matching ErrInvalidDevice.
func Parse(s string) (Spec, error) {
	if s == "host" {
		return Spec{}, nil
	}
	rest, ok := strings.CutPrefix(s, "cuda:")
	if !ok {
		return Spec{}, fmt.Errorf("%w %q: want host or cuda:N", ErrInvalidDevice, s)
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || rest != strconv.Itoa(n) {
		return Spec{}, fmt.Errorf("%w %q: want cuda:N with N a GPU ordinal (0, 1, ...)", ErrInvalidDevice, s)
	}
	return Spec{CUDA: true, Ordinal: n}, nil
}

// String returns the Spec as Parse reads it.
func (s Spec) String() string {
	if !s.CUDA {
		return "host"
	}
	return "cuda:" + strconv.Itoa(s.Ordinal)
}

// Set parses value into s, for the flag package.
func (s *Spec) Set(value string) error {
	spec, err := Parse(value)
	if err != nil {
		return err
	}
	*s = spec
	return nil
}

// Var defines the -device flag on fs, with Usage as its help and s's value
// as its default.
func Var(fs *flag.FlagSet, s *Spec) {
	fs.Var(s, "device", Usage)
}

// Device is an open device, with the books the examples report at shutdown
// and Close. It is safe for concurrent use, except Close.
type Device interface {
	tensor.Device
	// Used returns the bytes allocated and not freed.
	Used() int64
	// Blocks returns the number of allocations not freed.
	Blocks() int
	// Close gives the device back. On a GPU it frees what is still
	// allocated and releases the CUDA context; on the host it does nothing.
	Close() error
}

// Open opens the device s names, with capacity bytes (> 0): the host
// device's size, or the cap on the memory taken from the GPU. A GPU that
// is not present, or any GPU in a binary built without -tags cuda, fails
// with an error matching tensor.ErrNoDevice that says why.
func Open(s Spec, capacity int64) (Device, error) {
	if !s.CUDA {
		host, err := tensor.NewHostDevice(capacity)
		if err != nil {
			return nil, err
		}
		return hostDevice{host}, nil
	}
	if capacity <= 0 {
		return nil, fmt.Errorf("%w: capacity %d for %s", tensor.ErrInvalidSize, capacity, s)
	}
	gpu, err := cuda.Open(s.Ordinal, cuda.WithMemoryLimit(capacity))
	if err != nil {
		return nil, err
	}
	return cudaDevice{gpu}, nil
}

type hostDevice struct{ *tensor.HostDevice }

// Close does nothing: host memory goes with the garbage collector.
func (hostDevice) Close() error { return nil }

type cudaDevice struct{ *cuda.Device }

func (d cudaDevice) Used() int64 {
	_, bytes := d.Outstanding()
	return bytes
}

func (d cudaDevice) Blocks() int {
	blocks, _ := d.Outstanding()
	return blocks
}
