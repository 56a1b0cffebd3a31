package report

import (
	"fmt"
	"slices"

	"github.com/tensorlife/tensorlife/internal/counter"
	"github.com/tensorlife/tensorlife/internal/invariants"
	"github.com/tensorlife/tensorlife/mask"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
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

// WatcherReading is what one growth watcher showed at one reading: its
// settings, the windows it has ended and its suspects.
type WatcherReading struct {
	Rules        watch.Rules
	WindowsEnded uint64
	Suspects     []watch.Suspect
}

// SuspectSource is a growth watcher whose suspects a summary lists: a
// *watch.Watcher.
type SuspectSource interface {
	Rules() watch.Rules
	WindowsEnded() uint64
	SuspectCount() int
	Suspects() []watch.Suspect
}

// DeviceSource is a device whose memory a summary reads: a tensor.Device.
type DeviceSource interface {
	Name() string
	MemInfo() (free, total int64, err error)
}

// Sources name figures made without the tracker that a report or a
// metrics registration should show besides its parts: a pool made with
// pool.Untracked, a cache that never kept a mask of the tracker's, a device
// no allocator of the tracker draws from (a foreign library's). What was
// made with the tracker (its pools, direct allocators, watchers and the
// caches that keep its masks, and their devices) attached itself to it
// (track.Attach) and is found with nothing passed; listing it again here
// shows it once. Each is read only when a summary is written or metrics
// are collected.
type Sources struct {
	Pools   []PoolSource
	Caches  []CacheSource
	Devices []DeviceSource
}

// Validate reports a nil source, which would fail the first report rather
// than here. Errors match ErrInvalidOption.
func (s Sources) Validate() error {
	if err := noNil("Pools", s.Pools); err != nil {
		return err
	}
	if err := noNil("Caches", s.Caches); err != nil {
		return err
	}
	return noNil("Devices", s.Devices)
}

// noNil reports the first nil source in list, the field of Sources named
// field.
func noNil[S any](field string, list []S) error {
	for i, src := range list {
		if invariants.IsNil(src) {
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
	Used  int64
	Free  int64
	Total int64
	// Reserved is what the allocators on this device hold: those attached
	// to the tracker (track.Attach) and those in Sources.Pools.
	Reserved int64
	// Outside is Used - Reserved, never below 0: while an allocation is in
	// flight a pool may count bytes the device has not yet handed out.
	// Reserved itself is reported as the allocators say, and may exceed
	// Used.
	Outside int64
	// Err is why the device could not report its memory; the figures other
	// than Device, Reserved and HardwareID are then 0.
	Err error
	// HardwareID names the hardware of a device that identifies it (a
	// method UUID() string, as a CUDA device has); "" otherwise.
	HardwareID string
}

// Reading is what a tracker's parts and a Sources hold at one moment, each
// pool read once, so that every figure of one report or one metrics
// collection agrees with the others: a pool's reserved bytes count the same
// in its own row and in its device's split.
type Reading struct {
	// Pools are the pools attached to the tracker, in the order they were
	// made, then those of Sources.Pools not among them.
	Pools []pool.Stats
	// Caches are the caches attached to the tracker, then those of
	// Sources.Caches not among them.
	Caches []mask.CacheStats
	// Devices are the memory of the devices of the tracker's allocators,
	// then of Sources.Devices, each name once. Devices are matched to
	// allocators by name, so two devices of one tracker need distinct
	// names.
	Devices []DeviceMemory
	// Watchers are what the growth watchers of the tracker showed, in the
	// order they were made.
	Watchers []WatcherReading
	// Skipped are the calls into sources that panicked, each a
	// *track.PanicError naming the part and the method: their figures are
	// missing from the reading. Empty when every source answered.
	Skipped []error
}

// Read reads tr's parts and s; tr may be nil, and then only s counts. It
// reads counters and MemInfo only: O(parts + devices). Every part is read
// through the tracker's seam (track.Read), and every source of s and every
// device through the same guard (track.Guard): one that panics is counted
// on tr (Totals.PartPanics), listed in Reading.Skipped, and its figure is
// left out: a pool, cache or watcher is not listed, a device's memory is
// unknown (DeviceMemory.Err).
func (s Sources) Read(tr *track.Tracker) Reading {
	var r Reading
	reserved := make(map[string]int64)
	var pools []PoolSource
	var caches []CacheSource
	var devices []DeviceSource
	addPool := func(st pool.Stats) { // read once: its reserved bytes come from here too
		r.Pools = append(r.Pools, st)
		reserved[st.Device] = counter.AddSat(reserved[st.Device], max(st.Reserved, 0))
	}
	if tr != nil {
		parts, skipped := tr.Books().PartInfos()
		r.Skipped = append(r.Skipped, skipped...)
		for _, p := range parts {
			if _, isPool := p.Part.(PoolSource); !isPool && p.Device != "" {
				reserved[p.Device] = counter.AddSat(reserved[p.Device], p.Reserved)
			}
		}
		r.skip(track.Read(tr, "Stats", func(p PoolSource) {
			addPool(p.Stats())
			pools = append(pools, p)
		}))
		r.skip(track.Read(tr, "Stats", func(c CacheSource) {
			r.Caches = append(r.Caches, c.Stats())
			caches = append(caches, c)
		}))
		r.skip(track.Read(tr, "Device", func(a tensor.Allocator) {
			if dev := a.Device(); !invariants.IsNil(dev) {
				devices = append(devices, dev)
			}
		}))
		r.skip(track.Read(tr, "Suspects", func(w SuspectSource) {
			r.Watchers = append(r.Watchers, WatcherReading{Rules: w.Rules(), WindowsEnded: w.WindowsEnded(), Suspects: w.Suspects()})
		}))
	}
	for _, p := range s.Pools {
		var st pool.Stats
		if !slices.Contains(pools, p) && r.call(tr, p, "Stats", func() { st = p.Stats() }) {
			addPool(st)
		}
	}
	for _, c := range s.Caches {
		var st mask.CacheStats
		if !slices.Contains(caches, c) && r.call(tr, c, "Stats", func() { st = c.Stats() }) {
			r.Caches = append(r.Caches, st)
		}
	}
	devices = append(devices, s.Devices...)
	seen := make(map[string]bool, len(devices))
	for _, d := range devices {
		var name string
		if !r.call(tr, d, "Name", func() { name = d.Name() }) {
			continue // a device without a name matches no allocator's figures
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		m := DeviceMemory{Device: name, Reserved: reserved[name]}
		if h, ok := d.(tensor.Hardware); ok {
			r.call(tr, d, "UUID", func() { m.HardwareID = h.UUID() })
		}
		var free, total int64
		var err error
		if perr := track.Guard(tr, d, "MemInfo", func() { free, total, err = d.MemInfo() }); perr != nil {
			r.Skipped = append(r.Skipped, perr)
			err = &tensor.DeviceError{Op: "meminfo", Device: name, Err: perr}
		}
		if err != nil {
			m.Err = err
		} else {
			m.Free, m.Total, m.Used, m.Outside = split(free, total, m.Reserved)
		}
		r.Devices = append(r.Devices, m)
	}
	return r
}

// skip lists the parts a reading skipped.
func (r *Reading) skip(skipped []error) { r.Skipped = append(r.Skipped, skipped...) }

// call runs f, a call of method on a source of Sources or a device (not a
// part: those are read through track.Read), under the same guard, and
// reports whether it returned; a panic is noted on tr and listed in
// r.Skipped.
func (r *Reading) call(tr *track.Tracker, source any, method string, f func()) bool {
	if err := track.Guard(tr, source, method, f); err != nil {
		r.Skipped = append(r.Skipped, err)
		return false
	}
	return true
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
