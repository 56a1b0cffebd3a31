package report

import (
	"fmt"
	"math"
	"reflect"

	"github.com/tensorlife/tensorlife/internal/isnil"
	"github.com/tensorlife/tensorlife/mask"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/watch"
)

// PoolSource is an allocator that reports pool figures: a *pool.Pool.
type PoolSource interface {
	Stats() pool.Stats
}

// CacheSource is a cache that reports its figures: a *mask.Cache.
type CacheSource interface {
	Stats() mask.CacheStats
}

// DeviceSource is a device whose memory can be read: every tensor.Device.
type DeviceSource interface {
	Name() string
	MemInfo() (free, total int64, err error)
}

// Sources name the figures a report or a metrics registration reads besides
// the tracker's own: pools, caches, devices and a growth watcher. Each is
// read only when a summary is written or metrics are collected. A service
// builds one Sources value and passes it to WriteSummary (WithSources) and
// to the OpenTelemetry bridge alike.
type Sources struct {
	Pools   []PoolSource
	Caches  []CacheSource
	Devices []DeviceSource
	Watcher *watch.Watcher // must watch the same tracker
}

// Validate reports a nil source, which would fail the first report rather
// than here, and a watcher of another tracker than tr, whose sites would be
// reported next to figures they are not part of. Errors match
// ErrInvalidOption.
func (s Sources) Validate(tr *track.Tracker) error {
	if err := noNil("Pools", s.Pools); err != nil {
		return err
	}
	if err := noNil("Caches", s.Caches); err != nil {
		return err
	}
	if err := noNil("Devices", s.Devices); err != nil {
		return err
	}
	if s.Watcher != nil && tr != nil && s.Watcher.Tracker() != tr {
		return fmt.Errorf("%w: Sources.Watcher watches tracker %q, not %q",
			ErrInvalidOption, s.Watcher.Tracker().Name(), tr.Name())
	}
	return nil
}

// noNil reports the first nil source in list, the field of Sources named
// field.
func noNil[S any](field string, list []S) error {
	for i, src := range list {
		if isnil.Value(src) {
			return fmt.Errorf("%w: Sources.%s[%d] is nil", ErrInvalidOption, field, i)
		}
	}
	return nil
}

// DeviceMemory is one device's memory at one moment, split by whose it is.
// Used, Free and Total are the device's own figures (its MemInfo); Reserved
// is what tensorlife's allocators hold there; Outside is the rest of Used:
// memory that tensorlife does not account for (a cgo runtime's buffers, a
// math library's workspace, on a GPU another process). PyTorch calls it
// "non-PyTorch memory".
type DeviceMemory struct {
	Device string
	// Used is Total - Free as the device reports it. A device that reports
	// a negative total or free memory outside [0, total] is clamped, so
	// that Used - Outside (tensorlife's), Outside and Free are never
	// negative and always add up to Total.
	Used, Free, Total int64
	// Reserved is what the allocators on this device hold: those attached
	// to the tracker (track.Attach) and those in Sources.Pools.
	Reserved int64
	// Outside is Used - Reserved, never below 0: while an allocation is in
	// flight a pool may count bytes the device has not yet handed out.
	// Reserved itself is reported as the allocators say, and may exceed
	// Used.
	Outside int64
	// Err is why the device could not report its memory; the figures other
	// than Device and Reserved are then 0.
	Err error
}

// Reading is what a Sources holds at one moment, each pool read once, so
// that every figure of one report or one metrics collection agrees with the
// others: a pool's reserved bytes count the same in its own row and in its
// device's split.
type Reading struct {
	Pools []pool.Stats // of Sources.Pools, in order
	// Devices are the memory of Sources.Devices, in order. Devices are
	// matched to allocators by name, so two devices of one tracker need
	// distinct names.
	Devices []DeviceMemory
}

// Read reads s's pools and devices, with tr's attached allocators; tr may
// be nil, and then only s.Pools count as tensorlife's. It reads counters
// and MemInfo only: O(devices + allocators).
func (s Sources) Read(tr *track.Tracker) Reading {
	r := Reading{Pools: make([]pool.Stats, len(s.Pools))}
	pooled := make(map[uintptr]int, len(s.Pools)) // address -> index in s.Pools
	for i, p := range s.Pools {
		r.Pools[i] = p.Stats()
		if addr, ok := addressOf(p); ok {
			pooled[addr] = i
		}
	}
	if len(s.Devices) == 0 {
		return r
	}
	reserved := make(map[string]int64)
	counted := make(map[int]bool) // pools counted as attached allocators
	if tr != nil {
		for _, src := range tr.Allocators() {
			addr, _ := addressOf(src)
			if j, ok := pooled[addr]; ok {
				reserved[r.Pools[j].Device] = addSat(reserved[r.Pools[j].Device], r.Pools[j].Reserved)
				counted[j] = true
				continue
			}
			device, bytes := src.Reserved()
			reserved[device] = addSat(reserved[device], bytes)
		}
	}
	for i, st := range r.Pools {
		if !counted[i] {
			reserved[st.Device] = addSat(reserved[st.Device], st.Reserved)
		}
	}
	r.Devices = make([]DeviceMemory, 0, len(s.Devices))
	for _, d := range s.Devices {
		m := DeviceMemory{Device: d.Name(), Reserved: reserved[d.Name()]}
		free, total, err := d.MemInfo()
		if err != nil {
			m.Err = err
		} else {
			m.Free, m.Total, m.Used, m.Outside = split(free, total, m.Reserved)
		}
		r.Devices = append(r.Devices, m)
	}
	return r
}

// addSat returns a + b, held at the int64 bounds rather than wrapping, as
// track.Tracker.ReservedOn holds its sum: allocators that claim huge
// figures on one device must not read as a negative reservation, which
// would turn the device's split around.
func addSat(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}

// split turns a device's MemInfo and what tensorlife reserves there into
// figures that add up whatever the device or the books say: Free is
// clamped to [0, total] (total below 0 reads as 0), Used is the rest, and
// Outside is Used less what tensorlife holds, clamped to [0, Used], so that
// tensorlife (Used - Outside), outside and free are never negative and sum
// to Total.
func split(free, total, reserved int64) (f, t, used, outside int64) {
	t = max(total, 0)
	f = min(max(free, 0), t)
	used = t - f
	outside = used - min(max(reserved, 0), used)
	return f, t, used, outside
}

// addressOf returns the address of a pointer-shaped source, which tells a
// pool listed in Sources.Pools from the same pool attached to the tracker;
// false for a source of another shape.
func addressOf(src any) (uintptr, bool) {
	v := reflect.ValueOf(src)
	if v.Kind() != reflect.Pointer {
		return 0, false
	}
	return v.Pointer(), true
}
