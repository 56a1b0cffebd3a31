package pool_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/invariants"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/tensortest"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

// newFault returns a fault device over a host device of capacity bytes.
func newFault(t testing.TB, capacity int64, opts ...tensortest.FaultOption) *tensortest.Faulty {
	t.Helper()
	host, err := tensor.NewHostDevice(capacity)
	require.NoError(t, err)
	d, err := tensortest.NewFaulty(host, opts...)
	require.NoError(t, err)
	return d
}

// newTracker returns an isolated tracker, so tests see only their own
// sites, and checks when the test ends that every tensor was freed.
func newTracker(t testing.TB) *track.Tracker {
	t.Helper()
	tr, err := track.New(track.Name(t.Name()))
	require.NoError(t, err)
	t.Cleanup(func() { tracktest.VerifyNone(t, tr) })
	return tr
}

// newPool returns a pool over dev recording into a tracker of its own.
func newPool(t testing.TB, dev tensor.Device, opts ...pool.Option) *pool.Pool {
	t.Helper()
	p, err := pool.New(dev, append([]pool.Option{pool.Tracker(newTracker(t))}, opts...)...)
	require.NoError(t, err)
	return p
}

// requireBalanced checks a quiet pool's books against each other and
// against the device: reserved is active plus cached, and what the pool
// believes it holds is what the device has handed out.
func requireBalanced(t *testing.T, p *pool.Pool, dev *tensortest.Faulty) pool.Stats {
	t.Helper()
	s := p.Stats()
	blocks, bytes := dev.Outstanding()
	require.Equal(t, s.Reserved, s.Active+s.Cached, "reserved != active + cached: %+v", s)
	require.Equal(t, bytes, s.Reserved, "device outstanding bytes != pool reserved: %+v", s)
	require.EqualValues(t, blocks, s.ActiveBlocks+s.CachedBlocks, "device outstanding blocks != pool blocks: %+v", s)
	require.EqualValues(t, s.DeviceAllocs-s.DeviceFrees, blocks, "device allocs - frees != outstanding blocks: %+v", s)
	require.LessOrEqual(t, s.Reserved, s.PeakReserved)
	require.LessOrEqual(t, s.Active, s.PeakActive)
	if s.Limit > 0 {
		require.LessOrEqual(t, s.PeakReserved, s.Limit, "the budget was exceeded")
	}
	if s.MaxCached >= 0 {
		require.LessOrEqual(t, s.Cached, s.MaxCached, "the cache cap was exceeded")
	}
	assert.Zero(t, dev.DoubleFrees(), "the pool freed a device pointer twice")
	assert.Zero(t, dev.BadFrees(), "the pool freed a pointer it did not hold")
	return s
}

// virtualDevice hands out address ranges without memory behind them, so
// tests can allocate blocks of many GiB. Copies are refused.
type virtualDevice struct {
	mu    sync.Mutex
	next  tensor.DevicePtr
	live  map[tensor.DevicePtr]int64
	total int64
	used  int64
}

func newVirtualDevice(total int64) *virtualDevice {
	return &virtualDevice{next: 1 << 20, live: map[tensor.DevicePtr]int64{}, total: total}
}

var errVirtual = errors.New("virtual device holds no bytes")

func (d *virtualDevice) Name() string { return "virtual" }

func (d *virtualDevice) Alloc(bytes int64) (tensor.DevicePtr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if bytes <= 0 {
		return 0, &tensor.DeviceError{Op: "alloc", Device: d.Name(), Bytes: bytes, Err: tensor.ErrInvalidSize}
	}
	if bytes > d.total-d.used {
		return 0, &tensor.DeviceError{Op: "alloc", Device: d.Name(), Bytes: bytes, Err: tensor.ErrOutOfMemory}
	}
	p := d.next
	d.next += tensor.DevicePtr(bytes)
	d.live[p] = bytes
	d.used += bytes
	return p, nil
}

func (d *virtualDevice) Free(p tensor.DevicePtr, bytes int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.live[p] != bytes {
		return &tensor.DeviceError{Op: "free", Device: d.Name(), Bytes: bytes, Err: tensor.ErrInvalidPointer}
	}
	delete(d.live, p)
	d.used -= bytes
	return nil
}

func (d *virtualDevice) MemInfo() (free, total int64, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.total - d.used, d.total, nil
}

func (d *virtualDevice) CopyToDevice(tensor.DevicePtr, []byte) error { return errVirtual }
func (d *virtualDevice) CopyToHost([]byte, tensor.DevicePtr) error   { return errVirtual }
func (d *virtualDevice) Memset(tensor.DevicePtr, byte, int64) error  { return errVirtual }

// noMemInfoDevice is a device whose MemInfo fails.
type noMemInfoDevice struct{ tensor.Device }

var errNoMemInfo = errors.New("meminfo unavailable")

func (noMemInfoDevice) MemInfo() (int64, int64, error) { return 0, 0, errNoMemInfo }

// release is p.Release for blocks the pool must refuse: built with the
// tensorlife_invariants tag, the refusal is a panic, which release turns
// back into the error it carries, so the same checks hold either way.
func release(p *pool.Pool, b tensor.Block) (err error) {
	if invariants.Enabled {
		defer func() {
			if r := recover(); r != nil {
				err = r.(error)
			}
		}()
	}
	return p.Release(b)
}
