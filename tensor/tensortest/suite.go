package tensortest

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/option"
	"github.com/tensorlife/tensorlife/tensor"
)

// NewDeviceFunc returns a new device for one test. The device must have room
// for at least capacity bytes, and its MemInfo must move only with the
// suite's own allocations: a device over a shared GPU should be capped to
// capacity (cuda.WithMemoryLimit). The function registers any cleanup, such
// as closing the device, with t.Cleanup, and skips t (t.Skip) when no device
// can be had.
type NewDeviceFunc func(t *testing.T, capacity int64) tensor.Device

// Option adjusts the suite to what a device can do. Run fails the test on
// an invalid one (an error matching ErrInvalidOption).
type Option interface {
	apply(*config) error
}

type config struct {
	capacity      int64
	pointerChecks bool
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// DefaultCapacity is the capacity the suite asks NewDeviceFunc for unless
// WithCapacity says otherwise.
const DefaultCapacity = 16 << 20

// WithCapacity sets the capacity passed to NewDeviceFunc; it must be at
// least 1 MiB, so that the suite's blocks fit. Allocation sizes in the suite
// scale with it.
func WithCapacity(bytes int64) Option {
	return optionFunc(option.AtLeast("WithCapacity", bytes, 1<<20, func(c *config, n int64) { c.capacity = n }))
}

// WithoutPointerChecks is for a device that cannot tell a pointer it handed
// out from any other (it passes pointers straight to a driver): the suite
// then skips the checks that Free and copies refuse unknown pointers, wrong
// sizes and ranges past the end of a block.
func WithoutPointerChecks() Option {
	return optionFunc(option.Set(false, func(c *config, on bool) { c.pointerChecks = on }))
}

// checks are the suite's subtests, in the order Run runs them.
var checks = []struct {
	name string
	run  func(t *testing.T, s *suite)
}{
	{"AllocFree", testAllocFree},
	{"CopyRoundTrip", testCopyRoundTrip},
	{"CopyWithOffsets", testCopyWithOffsets},
	{"Memset", testMemset},
	{"MemInfo", testMemInfo},
	{"OutOfMemory", testOutOfMemory},
	{"InvalidSize", testInvalidSize},
	{"InvalidPointer", testInvalidPointer},
	{"CopyOutOfRange", testCopyOutOfRange},
	{"Concurrent", testConcurrent},
}

// Checks returns the names of the suite's subtests, in the order Run runs
// them: what `go test -run 'Conformance/NAME'` selects.
func Checks() []string {
	names := make([]string, len(checks))
	for i, c := range checks {
		names[i] = c.name
	}
	return names
}

// Run runs the suite as subtests of t, each on a device of its own.
func Run(t *testing.T, newDevice NewDeviceFunc, opts ...Option) {
	t.Helper()
	cfg := config{capacity: DefaultCapacity, pointerChecks: true}
	require.NoError(t, option.Apply(&cfg, opts, Option.apply, ErrInvalidOption))

	for _, tc := range checks {
		t.Run(tc.name, func(t *testing.T) {
			dev := newDevice(t, cfg.capacity)
			require.NotNil(t, dev, "tensortest: NewDeviceFunc returned nil")
			s := &suite{dev: dev, cfg: cfg}
			free, _, err := dev.MemInfo()
			require.NoError(t, err)
			tc.run(t, s)
			if t.Failed() {
				return
			}
			// Whatever a subtest allocated, it freed: the device must be
			// back where it started.
			after, _, err := dev.MemInfo()
			require.NoError(t, err)
			assert.Equal(t, free, after, "free bytes after the subtest differ from before: a block was not returned")
		})
	}
}

// suite is what each subtest works on.
type suite struct {
	dev tensor.Device
	cfg config
}

// alloc allocates bytes and registers nothing: subtests free what they
// allocate, so that the final MemInfo check sees the frees.
func (s *suite) alloc(t *testing.T, bytes int64) tensor.DevicePtr {
	t.Helper()
	p, err := s.dev.Alloc(bytes)
	require.NoError(t, err, "Alloc(%d)", bytes)
	require.NotZero(t, p, "Alloc(%d) returned the zero pointer", bytes)
	return p
}

func (s *suite) free(t *testing.T, p tensor.DevicePtr, bytes int64) {
	t.Helper()
	require.NoError(t, s.dev.Free(p, bytes), "Free(%#x, %d)", uintptr(p), bytes)
}

// read copies n bytes from p back to the host.
func (s *suite) read(t *testing.T, p tensor.DevicePtr, n int64) []byte {
	t.Helper()
	out := make([]byte, n)
	require.NoError(t, s.dev.CopyToHost(out, p))
	return out
}

// requireError checks that err matches want with errors.Is and is a
// *tensor.DeviceError from this device.
func (s *suite) requireError(t *testing.T, err, want error, call string) {
	t.Helper()
	require.Error(t, err, "%s succeeded; want an error matching %v", call, want)
	assert.ErrorIs(t, err, want, "%s", call)
	var de *tensor.DeviceError
	if assert.True(t, errors.As(err, &de), "%s: error %T is not a *tensor.DeviceError: %v", call, err, err) {
		assert.Equal(t, s.dev.Name(), de.Device, "%s: DeviceError.Device", call)
		assert.NotEmpty(t, de.Op, "%s: DeviceError.Op", call)
	}
}

// pattern returns n bytes that differ from those of any other seed.
func pattern(n int64, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) ^ seed
	}
	return b
}
