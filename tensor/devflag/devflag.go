// Package devflag is a -device flag for programs over tensorlife (the
// examples take it): a comma-separated list of devices, each "host" for a host device, Go memory
// that behaves like a GPU of a given capacity, or "cuda:N" for GPU N.
// Several entries stand for a service spread over several GPUs; two host
// entries ("host,host") stand in for two GPUs and are named host:0 and
// host:1, while a single host device keeps the name "host".
//
//	var list devflag.List                  // the zero List is "host"
//	devflag.Var(fs, &list)                 // -device host|cuda:N[,...]
//	...
//	devs, err := devflag.OpenAll(list, capacity)
//	if err != nil {
//		return err // cuda:N in a binary built without -tags cuda: says how to build it
//	}
//	defer devflag.CloseAll(devs)
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

// ErrInvalidDevice means a -device entry is neither "host" nor "cuda:N",
// or a list names one GPU twice.
var ErrInvalidDevice = errors.New("devflag: invalid device")

// Usage is the help text of the -device flag.
const Usage = `devices to run on, comma-separated: host, the default (Go memory that behaves like a GPU of -capacity bytes), ` +
	`or cuda:N (GPU N, in a binary built with -tags cuda; -capacity caps the memory taken from it); ` +
	`several (host,host or cuda:0,cuda:1) spread the requests round-robin, each with -capacity and its own pool`

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

// MaxDevices bounds a -device list: more entries than any one machine
// holds GPUs is a typo.
const MaxDevices = 64

// List is a -device value: the devices a program spreads its work over, in
// order. The zero List means one host device.
type List []Spec

// ParseList reads a comma-separated list of 1..MaxDevices entries, each as
// Parse reads it. An empty entry, a bad one, or a GPU named twice fails with
// an error matching ErrInvalidDevice; host may repeat, each entry a device
// of its own.
func ParseList(s string) (List, error) {
	parts := strings.Split(s, ",")
	if len(parts) > MaxDevices {
		return nil, fmt.Errorf("%w %q: %d devices, want at most %d", ErrInvalidDevice, s, len(parts), MaxDevices)
	}
	list := make(List, 0, len(parts))
	seen := make(map[Spec]bool, len(parts))
	for _, part := range parts {
		spec, err := Parse(part)
		if err != nil {
			return nil, err
		}
		if spec.CUDA && seen[spec] {
			return nil, fmt.Errorf("%w %q: %s named twice", ErrInvalidDevice, s, spec)
		}
		seen[spec] = true
		list = append(list, spec)
	}
	return list, nil
}

// Specs returns the devices in order: one host device for the zero List.
func (l List) Specs() []Spec {
	if len(l) == 0 {
		return []Spec{{}}
	}
	return l
}

// String returns the List as ParseList reads it.
func (l List) String() string {
	parts := make([]string, 0, len(l))
	for _, s := range l.Specs() {
		parts = append(parts, s.String())
	}
	return strings.Join(parts, ",")
}

// Set parses value into l, for the flag package. A later -device replaces
// an earlier one.
func (l *List) Set(value string) error {
	list, err := ParseList(value)
	if err != nil {
		return err
	}
	*l = list
	return nil
}

// Var defines the -device flag on fs, with Usage as its help and l's value
// as its default.
func Var(fs *flag.FlagSet, l *List) {
	fs.Var(l, "device", Usage)
}

// Names returns the names the devices of l get from OpenAll, in order: a
// GPU is cuda:N; a host device is "host" when it is the only one, and
// host:I, I counting the host entries from 0, when there are several.
func (l List) Names() []string {
	specs := l.Specs()
	hosts := 0
	for _, s := range specs {
		if !s.CUDA {
			hosts++
		}
	}
	names := make([]string, len(specs))
	host := 0
	for i, s := range specs {
		switch {
		case s.CUDA || hosts == 1:
			names[i] = s.String()
		default:
			names[i] = "host:" + strconv.Itoa(host)
			host++
		}
	}
	return names
}

// OpenAll opens every device of l, each with capacity bytes as Open takes
// it, named as Names says. When one fails, those already open are closed
// and the error says which entry failed.
func OpenAll(l List, capacity int64) ([]Device, error) {
	specs, names := l.Specs(), l.Names()
	devs := make([]Device, 0, len(specs))
	for i, s := range specs {
		dev, err := open(s, capacity, names[i])
		if err != nil {
			return nil, errors.Join(err, CloseAll(devs))
		}
		devs = append(devs, dev)
	}
	return devs, nil
}

// CloseAll closes every device, joining their errors.
func CloseAll(devs []Device) error {
	var errs []error
	for _, d := range devs {
		errs = append(errs, d.Close())
	}
	return errors.Join(errs...)
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
	return open(s, capacity, s.String())
}

// open opens s; a host device is named name, a GPU keeps its own.
func open(s Spec, capacity int64, name string) (Device, error) {
	if !s.CUDA {
		host, err := tensor.NewHostDevice(capacity, tensor.DeviceName(name))
		if err != nil {
			return nil, err
		}
		return hostDevice{host}, nil
	}
	if capacity <= 0 {
		return nil, fmt.Errorf("%w: capacity %d for %s", tensor.ErrInvalidSize, capacity, s)
	}
	gpu, err := cuda.Open(s.Ordinal, cuda.WithMemoryLimit(capacity))
	//lint:ignore SA4023 without the cuda build tag cuda.Open always fails; with it, it can succeed
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
