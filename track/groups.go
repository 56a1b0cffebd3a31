package track

import (
	"iter"

	"github.com/tensorlife/tensorlife/internal/grouping"
)

// Groups are the groups of one snapshot, kept apart from it (GroupsOf) to
// be read one at a time in the order of Snapshot.Groups. What they hold
// while unread is a compact entry per group, the 72 bytes the walk keeps
// anyway, not the Group (about 150 bytes) a slice of them would hold: a
// profile by request ids (Filter.LabelKeys) of a million groups writes
// each as it reads it and holds none. Groups are immutable: All may be
// called any number of times, from several goroutines at once.
type Groups struct {
	gr    *grouper
	order []grouping.Key // the grouper's entries, in order
	list  []Group        // a snapshot read from counters keeps its few groups whole
}

// GroupsOf takes the snapshot SnapshotOf(f) takes, its Groups left nil, and
// returns those groups apart, for a reader that writes each as it reads it
// (a profile's encoder) and so need not hold them all as Groups at once.
// The snapshot's Sites count the groups' live figures as SnapshotOf's do.
func (bk *Books) GroupsOf(f Filter) (*Snapshot, *Groups, error) {
	t := (*Tracker)(bk)
	if err := f.Validate(); err != nil {
		return nil, nil, err
	}
	if f.counted() {
		t.sweep()
		snap := t.counts().snapshot(f)
		gs := &Groups{list: snap.Groups}
		snap.Groups = nil
		return snap, gs, nil
	}
	now, gr, allocs := t.walk(f)
	snap, bySite := t.startSnapshot(f, now, allocs)
	gs := &Groups{gr: gr, order: gr.sorted()}
	gr.groups.Seal() // found by position from now on, never by hash
	for _, k := range gs.order {
		g := gr.groupAt(k.At)
		addToSite(bySite, &g)
	}
	t.endSnapshot(snap, bySite)
	return snap, gs, nil
}

// Len returns how many groups there are.
func (gs *Groups) Len() int {
	if gs.gr == nil {
		return len(gs.list)
	}
	return len(gs.order)
}

// All yields each group in the order of Snapshot.Groups. The Group yielded
// is the iterator's own, overwritten by the next: copy it to keep it (its
// Labels, Shape and HeldBy are shared, immutable, and may be kept as
// they are).
func (gs *Groups) All() iter.Seq[*Group] {
	return func(yield func(*Group) bool) {
		var g Group
		if gs.gr == nil {
			for i := range gs.list {
				g = gs.list[i]
				if !yield(&g) {
					return
				}
			}
			return
		}
		for _, k := range gs.order {
			g = gs.gr.groupAt(k.At)
			if !yield(&g) {
				return
			}
		}
	}
}
