package pool

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// oomError counts an out-of-memory refusal and describes it: the request,
// the limit that refused it, the pool's figures and the live sites holding
// the most memory. It runs on the failure path only.
func (p *Pool) oomError(size int64, refused string, devErr error) error {
	p.ooms.Add(1)
	s := p.Stats()
	e := &tensor.OOMError{
		Device:     s.Device,
		Requested:  size,
		Reserved:   s.Reserved,
		Active:     s.Active,
		Cached:     s.Cached,
		DeviceFree: -1,
		Reason:     refused,
		Err:        devErr,
	}
	free, total, err := p.dev.MemInfo()
	if err == nil {
		e.DeviceFree = free
	}
	switch {
	case refused == "budget":
		e.Limit = p.budget
	case err == nil:
		e.Limit = total
	}
	e.TopSites = p.topLiveSites()
	return e
}

// topLiveSites reads the tracker's per-site counters (no walk of the live
// set) and returns the sites holding the most live bytes. The tracker is
// shared by every allocator that records into it, so sites on other devices
// may be listed too.
func (p *Pool) topLiveSites() []tensor.SiteSummary {
	if p.tracker == nil || p.topSites == 0 {
		return nil
	}
	var out []tensor.SiteSummary
	for _, st := range p.tracker.SiteTotals() { // sorted by live bytes
		if len(out) == p.topSites || st.LiveBytes <= 0 {
			break
		}
		out = append(out, summarize(st.Site, st.LiveCount, st.LiveBytes))
	}
	return out
}

func summarize(s *track.Site, count, bytes int64) tensor.SiteSummary {
	f := s.Location()
	return tensor.SiteSummary{Function: f.Function, File: f.File, Line: f.Line, Count: count, Bytes: bytes}
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
	Sites []tensor.SiteSummary
}

func (e *ActiveBlocksError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "pool: closed with %d active blocks (%s) on %s", e.Blocks, tensor.FormatBytes(e.Bytes), e.Device)
	if len(e.Sites) == 0 {
		b.WriteString("; no live sites known (untracked pool)")
	} else {
		// The layout of tensor.OOMError's site list, so both read alike.
		b.WriteString("\n  live sites:")
		for i, s := range e.Sites {
			fmt.Fprintf(&b, "\n  %d. %s in %d tensors: %s\n       %s:%d", i+1, tensor.FormatBytes(s.Bytes), s.Count, s.Function, s.File, s.Line)
		}
	}
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
		return fmt.Errorf("%w: pool on %s closed twice", tensor.ErrClosed, p.dev.Name())
	}
	err := p.EmptyCache()
	if blocks := p.deviceBlocks.Load(); blocks > 0 {
		err = errors.Join(err, &ActiveBlocksError{Device: p.dev.Name(), Blocks: blocks,
			Bytes: p.active.load(), Sites: p.liveSitesOnDevice()})
	}
	return err
}

// liveSitesOnDevice aggregates the tracker's live groups on the pool's
// device per site. It walks the live set, which is fine at Close.
func (p *Pool) liveSitesOnDevice() []tensor.SiteSummary {
	if p.tracker == nil {
		return nil
	}
	snap, err := p.tracker.SnapshotOf(track.Filter{})
	if err != nil {
		return nil
	}
	name := p.dev.Name()
	bySite := map[*track.Site]*tensor.SiteSummary{}
	var order []*track.Site
	for _, g := range snap.Groups {
		if g.Device != name {
			continue
		}
		s := bySite[g.Site]
		if s == nil {
			sum := summarize(g.Site, 0, 0)
			s = &sum
			bySite[g.Site] = s
			order = append(order, g.Site)
		}
		s.Count += g.Count
		s.Bytes += g.Bytes
	}
	out := make([]tensor.SiteSummary, 0, len(order))
	for _, site := range order {
		out = append(out, *bySite[site])
	}
	slices.SortStableFunc(out, func(a, b tensor.SiteSummary) int {
		return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), strings.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line))
	})
	return out
}
