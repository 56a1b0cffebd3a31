package tracktest

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tensorlife/tensorlife/internal/format"
	"github.com/tensorlife/tensorlife/track"
)

// ErrLeaked means a check found tensors leaked. The error is a *LeakError
// that lists them.
var ErrLeaked = errors.New("tracktest: tensors leaked")

// LeakState says how a check found a tensor leaked.
type LeakState uint8

const (
	// Live: the tensor was still live when the check ended.
	Live LeakState = iota
	// Dropped: the garbage collector found the tensor's handle unreachable
	// before Free. The tensor may still be live (a tracker that keeps
	// leaked tensors) or may have been reclaimed already; the package doc
	// says when a check sees such a tensor.
	Dropped
)

// String returns the state as the report words it.
func (s LeakState) String() string {
	switch s {
	case Live:
		return "live"
	case Dropped:
		return "dropped without Free (found by the garbage collector)"
	default:
		return fmt.Sprintf("LeakState(%d)", uint8(s))
	}
}

// Leak is one leaked tensor: its allocation as the tracker recorded it, how
// it was found leaked, and its age when the check ended. A tensor whose
// handles were dropped is one Dropped Leak per line that made them.
type Leak struct {
	track.Allocation
	State LeakState
	Age   time.Duration
	// Holder names the dropped handles of a Dropped leak by the line that
	// made them (Holder.Dropped counts them), whenever the collector found
	// them; zero for a Live leak (Allocation.Holders lists its holders).
	Holder track.Holder
	// KeptBy names, for a Live leak of a check with Retainers, the
	// shortest chain of references from a root to each of the tensor's
	// live handles that has one, as the report prints it:
	// `package var main.maskCache["prompt-17"]   (map[string]*tensor.Tensor)`.
	// Empty when the check did not search, or found no path.
	KeptBy []string
}

// LeakError is the report of a check that found leaked tensors. Its Error
// text lists every leak grouped by allocation site, sites ordered by
// function, file and line, tensors by id, so two runs of the same test print
// the same text (ages aside). It matches ErrLeaked with errors.Is.
//
// A LeakError is not modified after a check returns it; it is safe to read
// from several goroutines.
type LeakError struct {
	// Tracker is the name of the tracker checked.
	Tracker string
	// Scope is the ScopeLabel value of the test scope checked (Context), or
	// empty for a check of the whole tracker.
	Scope string
	// Checked is when the check took its last look.
	Checked time.Time
	// Leaks are sorted as the report prints them.
	Leaks []Leak
	// Tensors and Bytes count the listed tensors and their memory, each
	// tensor once however many of its handles are listed; Handles counts
	// those handles (Live ones by Holder.Live, Dropped ones by
	// Holder.Dropped).
	Tensors int
	Handles int
	Bytes   int64
	// MoreDropped counts tensors found dropped beyond those listed: a
	// check keeps at most 1000 of them, so that a test dropping handles in
	// a loop cannot grow the report without bound.
	MoreDropped int
	// Retainers says how the retainer search went, for a check with
	// Retainers: what it could not name and the flag to rerun with, why it
	// did not run (goroutines in system calls, a heap over the cap).
	// Empty when the check did not search.
	Retainers string
	// Open are the requests still open when the check ended (of the scope
	// checked, or of the tracker), the largest five first: a tensor
	// listed Live that one of them holds in flight may be freed once the
	// request ends, and is listed all the same. A request's end is its
	// context's.
	Open []track.RequestStats

	// counted holds the ids Tensors and Bytes already count, while the
	// check lists leaks.
	counted map[uint64]struct{}
}

// add lists a in state s.
func (e *LeakError) add(a track.Allocation, s LeakState) {
	e.addLeak(Leak{Allocation: a, State: s})
}

// addLeak lists l, its age taken at the check; a tensor counts once however
// many of its handles are listed.
func (e *LeakError) addLeak(l Leak) {
	l.Age = max(0, e.Checked.Sub(l.Time))
	e.Leaks = append(e.Leaks, l)
	e.Handles += l.handles()
	if _, ok := e.counted[l.ID]; !ok {
		e.counted[l.ID] = struct{}{}
		e.Tensors++
		e.Bytes += l.Bytes
	}
}

// handles counts the handles l stands for: a live tensor's live holders, or
// the dropped handles of one line.
func (l *Leak) handles() int {
	if l.State == Live {
		return max(1, liveHolders(&l.Allocation))
	}
	return max(1, l.Holder.Dropped)
}

// tally counts the tensors, bytes and handles of leaks, each tensor once.
func tally(leaks []Leak) (tensors, handles int, bytes int64) {
	seen := make(map[uint64]struct{}, len(leaks))
	for i := range leaks {
		handles += leaks[i].handles()
		if _, ok := seen[leaks[i].ID]; !ok {
			seen[leaks[i].ID] = struct{}{}
			tensors++
			bytes += leaks[i].Bytes
		}
	}
	return tensors, handles, bytes
}

// Is reports whether target is ErrLeaked.
func (e *LeakError) Is(target error) bool { return target == ErrLeaked }

// Count returns the number of leaks in state s.
func (e *LeakError) Count(s LeakState) int {
	n := 0
	for i := range e.Leaks {
		if e.Leaks[i].State == s {
			n++
		}
	}
	return n
}

// siteKey orders sites for the report. Frames are symbolized once per site.
type siteKey struct {
	loc   track.Frame
	stack string
	id    int
}

// keyOf reads a site's key. Every recorded allocation has a site.
func keyOf(s *track.Site) siteKey {
	return siteKey{loc: s.Location(), stack: s.Stack(""), id: s.ID()}
}

func (k siteKey) compare(o siteKey) int {
	return cmp.Or(strings.Compare(k.loc.Function, o.loc.Function), strings.Compare(k.loc.File, o.loc.File),
		cmp.Compare(k.loc.Line, o.loc.Line), strings.Compare(k.stack, o.stack), cmp.Compare(k.id, o.id))
}

// holderSiteID orders holders by the site that made them; -1 for none.
func holderSiteID(h track.Holder) int {
	if h.Site == nil {
		return -1
	}
	return h.Site.ID()
}

// sort orders leaks by site, then by id, state and holder.
func (e *LeakError) sort() {
	keys := make(map[*track.Site]siteKey)
	for i := range e.Leaks {
		s := e.Leaks[i].Site
		if _, ok := keys[s]; !ok {
			keys[s] = keyOf(s)
		}
	}
	slices.SortFunc(e.Leaks, func(a, b Leak) int {
		if a.Site != b.Site {
			return keys[a.Site].compare(keys[b.Site])
		}
		return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.State, b.State),
			strings.Compare(a.Holder.How, b.Holder.How), cmp.Compare(holderSiteID(a.Holder), holderSiteID(b.Holder)))
	})
}

// Error renders the report, for instance (the "kept alive by" line is a
// check's with Retainers):
//
//	tracktest: 2 tensors leaked (8 KiB) in tracker "test":
//
//	site github.com/acme/infer.buildMask (mask.go:42): 2 tensors, 8 KiB
//	    tensor 7: bool[64 64], 4 KiB, kind mask, device host, age 12ms, labels {request=r1}
//	    tensor 8: bool[64 64], 4 KiB, kind mask, device host, age 11ms, labels {request=r2}
//	      kept alive by: package var github.com/acme/infer.masks["r2"]   (map[string]*tensor.Tensor)
//	  stack:
//	    github.com/acme/infer.buildMask
//	    	/src/infer/mask.go:42
//	    ...
func (e *LeakError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "tracktest: %s leaked (%s) in tracker %q",
		plural(e.Tensors, "tensor"), format.Bytes(e.Bytes), e.Tracker)
	if e.Scope != "" {
		fmt.Fprintf(&b, ", scope %s=%s", ScopeLabel, e.Scope)
	}
	var live, dropped int
	for i := range e.Leaks {
		if e.Leaks[i].State == Live {
			live += e.Leaks[i].handles()
		} else {
			dropped += e.Leaks[i].handles()
		}
	}
	// Handles are said apart from tensors when they differ, or some
	// were dropped: a View dropped and its tensor's own handle kept are
	// two handles of one tensor.
	if dropped+e.MoreDropped > 0 || e.Handles != e.Tensors {
		fmt.Fprintf(&b, " (%s: %d live, %d dropped without Free", plural(e.Handles, "handle"), live, dropped)
		if e.MoreDropped > 0 {
			fmt.Fprintf(&b, ", %d more dropped, not listed", e.MoreDropped)
		}
		b.WriteByte(')')
	}
	b.WriteString(":\n")
	var sites []*track.Site
	for i := range e.Leaks {
		if i == 0 || e.Leaks[i].Site != e.Leaks[i-1].Site {
			sites = append(sites, e.Leaks[i].Site)
		}
	}
	for i := 0; i < len(e.Leaks); {
		j := i + 1
		for j < len(e.Leaks) && e.Leaks[j].Site == e.Leaks[i].Site {
			j++
		}
		writeSite(&b, e.Leaks[i:j], sites)
		i = j
	}
	for _, line := range e.advice() {
		b.WriteString("\n")
		b.WriteString(line)
	}
	if e.Retainers != "" {
		b.WriteString("\nRetainers: " + e.Retainers + ".")
	}
	if len(e.Open) > 0 {
		fmt.Fprintf(&b, "\nStill open when the check ended (a request ends with its context), largest first:")
		for _, r := range e.Open {
			fmt.Fprintf(&b, "\n  %s in %s, open %s: %s", format.Bytes(r.InFlightBytes), plural(int(r.InFlightTensors), "tensor"),
				format.Age(r.Age), r.Labels)
		}
	}
	return b.String()
}

// advice returns what to do about the report's leaks, a line for each way
// the listed handles hold memory, in a fixed order: the fix for a handle
// never freed is not the fix for a View kept or a cache entry not evicted.
func (e *LeakError) advice() []string {
	var liveOwn, liveExtra, droppedOwn, droppedExtra bool
	liveOwners, droppedOwners := map[string]bool{}, map[string]bool{} // named owners: caches
	kind := func(h track.Holder, owners map[string]bool) (own, extra bool) {
		switch {
		case h.How == "" || ownHandle(h):
			return true, false
		case h.How == "View" || h.How == "Retain" || h.How == "handle":
			return false, true
		}
		owners[h.How] = true
		return false, false
	}
	for i := range e.Leaks {
		l := &e.Leaks[i]
		if l.State == Dropped {
			own, extra := kind(l.Holder, droppedOwners)
			droppedOwn, droppedExtra = droppedOwn || own, droppedExtra || extra
			continue
		}
		for _, h := range l.Holders {
			if h.Live > 0 {
				own, extra := kind(h, liveOwners)
				liveOwn, liveExtra = liveOwn || own, liveExtra || extra
			}
		}
	}
	var out []string
	if liveOwn {
		out = append(out, "Free live tensors before the check (defer their Free); one kept in a map, a channel or "+
			"a callback is freed by whoever deletes, drains or unregisters it; one meant to outlive its request "+
			"is handed to an owner (tensor.(*Tensor).HandTo with a track.Owner) that frees it; ignore those "+
			"meant to outlive the check (IgnoreSite, IgnoreKind, IgnoreLabel, IgnoreCurrent).")
	}
	if liveExtra {
		out = append(out, "A View or Retain is an owner of its own: free each one when done with it; the memory "+
			"returns when the last owner frees.")
	}
	for _, name := range slices.Sorted(maps.Keys(liveOwners)) {
		out = append(out, fmt.Sprintf("A %s keeps its memory until its owner frees it: evict or close the owner "+
			"before the check, or bound it.", name))
	}
	if droppedOwn || e.MoreDropped > 0 {
		out = append(out, "A dropped tensor's handle became unreachable before Free: free it on every path, "+
			"errors included, and free what a map entry or a channel holds before deleting or abandoning it; "+
			"one meant to outlive its request is handed to an owner (tensor.(*Tensor).HandTo with a track.Owner).")
	}
	if droppedExtra {
		out = append(out, "A View or Retain became unreachable before Free: each extra owner needs its own Free, "+
			"as the tensor's own handle does.")
	}
	for _, name := range slices.Sorted(maps.Keys(droppedOwners)) {
		out = append(out, fmt.Sprintf("A %s became unreachable before Free: its owner must free what it evicts, "+
			"and what it still holds when it is dropped (Close).", name))
	}
	return out
}

// writeSite renders one site's leaks, which share s. Where another of the
// report's sites has the same headline (one line reached through two
// callers), the heading adds the frame that tells them apart.
func writeSite(b *strings.Builder, leaks []Leak, sites []*track.Site) {
	site := leaks[0].Site
	tensors, handles, bytes := tally(leaks)
	loc := keyOf(site).loc
	fmt.Fprintf(b, "\nsite %s (%s:%d)", loc.Function, format.File(loc.File), loc.Line)
	if via, ok := site.DistinctFrame(sites); ok {
		fmt.Fprintf(b, " %s", format.Via(via.Function, via.File, via.Line))
	}
	fmt.Fprintf(b, ": %s, %s", plural(tensors, "tensor"), format.Bytes(bytes))
	if handles != tensors {
		fmt.Fprintf(b, ", %s", plural(handles, "handle"))
	}
	b.WriteByte('\n')
	for i := range leaks {
		l := &leaks[i]
		fmt.Fprintf(b, "    tensor %d: %s%s, %s, kind %s, device %s, age %s", l.ID, l.DType,
			format.Shape(l.Shape), format.Bytes(l.Bytes), l.Kind, l.Device, format.Age(l.Age))
		if l.Labels.Len() > 0 {
			fmt.Fprintf(b, ", labels %s", l.Labels)
		}
		if l.State != Live {
			fmt.Fprintf(b, ", %s", l.State)
			if l.Holder.How != "" && !ownHandle(l.Holder) {
				fmt.Fprintf(b, ": %s", l.Holder)
			}
			if l.Holder.Dropped > 1 {
				fmt.Fprintf(b, ", %d handles", l.Holder.Dropped)
			}
		}
		b.WriteByte('\n')
		if l.State == Live {
			writeHolders(b, l.Holders)
		}
		for _, k := range l.KeptBy {
			fmt.Fprintf(b, "      kept alive by: %s\n", k)
		}
	}
	b.WriteString("  stack:\n")
	b.WriteString(site.Stack("    "))
}

// writeHolders names the handles that keep a live tensor when any but its
// own handle does: the line to change is where the holder was made.
func writeHolders(b *strings.Builder, hs []track.Holder) {
	if len(hs) == 1 && ownHandle(hs[0]) {
		return // the site line already names it
	}
	for _, h := range hs {
		if h.Live > 0 {
			fmt.Fprintf(b, "      %s\n", format.HeldBy(h.String(), h.Live))
		}
	}
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// liveHolders counts a's handles neither freed nor found dropped.
func liveHolders(a *track.Allocation) int {
	n := 0
	for _, h := range a.Holders {
		n += h.Live
	}
	return n
}

// ownHandle reports whether h is its allocation's own handle, the one New
// returned (track.Holder.How "allocation").
func ownHandle(h track.Holder) bool { return h.How == "allocation" }
