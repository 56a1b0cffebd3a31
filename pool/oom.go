package pool

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"

	"github.com/tensorlife/tensorlife/internal/counter"
	"github.com/tensorlife/tensorlife/internal/format"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// oomError counts an out-of-memory refusal and describes it: the request,
// the limit that refused it, the pool's figures and the live sites holding
// the most memory, and hands it to OnOutOfMemory's hook. It runs on the
// failure path only.
func (p *Pool) oomError(size int64, refused string, devErr error) error {
	p.ooms.Add(1)
	s, largest := p.stats()
	e := &tensor.OOMError{
		Device:     s.Device,
		Requested:  size,
		Reserved:   s.Reserved,
		Active:     s.Active,
		Cached:     s.Cached,
		Promised:   s.Promised,
		Admissions: s.Admissions,
		DeviceFree: -1,
		Outside:    -1,
		Reason:     refused,
		Err:        devErr,
	}
	e.LargestCached = largest
	e.OtherReserved = p.otherReserved()
	free, total, err := p.memInfo()
	if err == nil {
		// As report's device split: clamped, so that no figure wraps
		// or reads negative whatever the device and the parts say.
		e.DeviceTotal = max(total, 0)
		e.DeviceFree = min(max(free, 0), e.DeviceTotal)
		used := e.DeviceTotal - e.DeviceFree
		e.Outside = used - min(counter.AddSat(max(s.Reserved, 0), e.OtherReserved), used)
	}
	switch {
	case refused == "budget":
		e.Limit = p.budget
	case err == nil:
		e.Limit = total
	}
	if p.tracker != nil {
		// The sites' counters, no walk of the live set; the tracker
		// is shared by every allocator that records into it, so sites
		// on other devices may be listed too. Neither depends on how
		// many requests are open.
		e.TopSites = p.tracker.TopSites(p.topSites)
		e.HeldBy = p.heldBy(e.TopSites)
		e.Requests = p.tracker.OpenRequests(oomRequestRows)
	}
	if p.onOOM != nil {
		p.callOnOOM(e)
	}
	return e
}

// callOnOOM calls OnOutOfMemory's hook, foreign code on an allocation's
// goroutine: a panic there would escape into the request that allocated,
// or end the process, so it is recovered, counted and logged, and the
// allocation returns its out-of-memory error all the same. A hook that
// calls runtime.Goexit ends the calling goroutine, as it would anywhere.
func (p *Pool) callOnOOM(e *tensor.OOMError) {
	defer func() {
		if v := recover(); v != nil {
			p.hookPanics.Add(1)
			p.logger.Error("tensorlife: the pool's OnOutOfMemory hook panicked; the allocation returns its error all the same",
				slog.String("device", e.Device), slog.Int64("requested", e.Requested), slog.String("panic", format.Value(v, 256)),
				slog.String("stack", string(debug.Stack())))
		}
	}()
	p.onOOM(e)
}

// oomRequestRows is how many open requests an out-of-memory error names:
// the largest, the rest summed as others.
const oomRequestRows = 5

// maxHeldBy bounds the owners an out-of-memory error names per site.
const maxHeldBy = 4

// heldBy returns who holds each site's memory once the tensors' own handles
// are freed: one walk of the live set, on the failure path only, so that
// the error names the View, Retain or cache entry that keeps the memory.
func (p *Pool) heldBy(sites []track.SiteStats) [][]track.Holder {
	if len(sites) == 0 {
		return nil
	}
	ss := make([]*track.Site, len(sites))
	for i := range sites {
		ss[i] = sites[i].Site
	}
	return p.tracker.Books().HeldBy(ss, maxHeldBy)
}

// otherReserved returns the bytes that the other allocators attached to
// the pool's tracker hold on its device (the registry holds this pool too,
// whose figures the caller has); 0 without a tracker.
func (p *Pool) otherReserved() int64 {
	if p.tracker == nil {
		return 0
	}
	// Other parts' code, read through the tracker's seam: one that panics
	// is counted and left out of the error.
	parts, _ := p.tracker.Books().PartInfos()
	var sum int64
	for _, other := range parts {
		if other.Part != track.Part(p) && other.Device == p.name {
			sum = counter.AddSat(sum, other.Reserved)
		}
	}
	return sum
}

// ActiveBlocksError is what Close returns when tensors still hold blocks of
// the pool: their memory stays allocated (freeing it under a live tensor
// would corrupt it) and returns to the device when they are freed. It
// matches ErrActiveBlocks with errors.Is.
type ActiveBlocksError struct {
	Device string
	Blocks int64 // blocks still handed out
	Bytes  int64 // their bytes, after rounding
	// Sites are the tracker's live sites on the pool's device, most bytes
	// first; empty for a pool without tracking. Another pool on the same
	// device and tracker contributes its sites too.
	Sites []track.SiteStats
	// HeldBy names, per Sites entry, the extra owners still holding its
	// memory after the tensors' own handles were freed.
	HeldBy [][]track.Holder
}

func (e *ActiveBlocksError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "pool: closed with %d active blocks (%s) on %s", e.Blocks, format.Bytes(e.Bytes), e.Device)
	if len(e.Sites) == 0 {
		b.WriteString("; no live sites known (untracked pool)")
	}
	tensor.WriteSites(&b, "live sites", e.Sites, e.HeldBy)
	return b.String()
}

// Is reports whether target is ErrActiveBlocks.
func (e *ActiveBlocksError) Is(target error) bool { return target == ErrActiveBlocks }

// Close returns every cached block to the device and stops the pool: later
// Allocate calls return an error matching tensor.ErrClosed, and blocks
// released later go straight back to the device, so tensors freed after
// Close do not leak. If blocks are still handed out, Close leaves them
// alone and returns an *ActiveBlocksError naming the live sites that hold
// them. A second Close returns an error matching tensor.ErrClosed.
//
// Close may run while other goroutines release blocks, but not while they
// allocate: a block allocated during Close may be missed in its report.
func (p *Pool) Close() error {
	if !p.closed.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: pool on %s closed twice", tensor.ErrClosed, p.name)
	}
	err := p.EmptyCache()
	if blocks := p.deviceBlocks.Load(); blocks > 0 {
		sites := p.liveSitesOnDevice()
		err = errors.Join(err, &ActiveBlocksError{Device: p.name, Blocks: blocks,
			Bytes: p.activeBytes(), Sites: sites, HeldBy: p.heldBy(sites)})
	} else {
		// Nothing is left for the tracker's reports to count: leave them
		// now. A pool closed with blocks out stays until it is collected,
		// since what it still holds is tensorlife's memory.
		track.Detach(p.tracker, p)
	}
	return err
}

// liveSitesOnDevice returns the tracker's sites with live tensors on the
// pool's device, most bytes first. It walks the live set (a snapshot
// filtered by device), which is fine at Close.
func (p *Pool) liveSitesOnDevice() []track.SiteStats {
	if p.tracker == nil {
		return nil
	}
	snap, err := p.tracker.SnapshotOf(track.Filter{Device: p.name})
	if err != nil {
		return nil
	}
	return snap.Top(len(snap.Sites)) // the sites with live tensors there, most bytes first
}
