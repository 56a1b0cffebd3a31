package pprofexport

import (
	"encoding/binary"
	"io"

	"github.com/tensorlife/tensorlife/internal/format"
	"github.com/tensorlife/tensorlife/track"
)

// A diff or delta written to a file or served (WriteDiff, ?seconds=N) is
// streamed too: the samples of both snapshots are added up in a table
// keyed as pprof keys a merge (the stack, the labels as written), with
// values end minus start, and only those that do not cancel out are
// written, with only the stacks they use. That is the profile combine
// builds with profile.Merge, which held two profiles and a merged third:
// a delta of 200k request ids that cancelled out to nothing took over a
// GiB of them. The table holds a few dozen bytes per sample.

// pairKey identifies a sample as profile.Merge does: its stack (the
// locations its site's frames make; two sites may make the same) and its
// labels as written, every string one interned id.
type pairKey struct {
	stack               int32
	dtype, device, kind int32
	shape, held, labels int32
	perTensor           int64
	leaked, site        bool
}

// pairEntry is one sample of the diff: the group or site it is written
// from, and its values so far.
type pairEntry struct {
	g      *track.Group // nil for a site's sample
	site   *track.Site
	leaked bool
	v      [numValues]int64
}

// pairTable adds up the samples of two snapshots.
type pairTable struct {
	cfg     *config
	st      *stacks // locations for stack identities only; never written
	stackID map[*track.Site]int32
	stacks  map[string]int32 // location ids, encoded -> stack id
	strs    map[string]int32
	byKey   map[pairKey]int32
	entries []pairEntry
	buf     []byte
	kept    []byte
	shapes  map[shapeKey]string
	held    map[track.Holder]string
	renamed map[string]string
}

func newPairTable(cfg *config, samples int) *pairTable {
	t := &pairTable{cfg: cfg, st: newStacks(newProfile(), cfg.keepLibrary), stackID: map[*track.Site]int32{},
		stacks: map[string]int32{}, strs: make(map[string]int32, samples+64), byKey: make(map[pairKey]int32, samples),
		entries: make([]pairEntry, 0, samples), shapes: map[shapeKey]string{}, held: map[track.Holder]string{},
		renamed: map[string]string{}}
	t.strs[""] = 0
	return t
}

// id interns str. A lookup with string(b) of a byte slice does not
// allocate; only a string seen first does.
func (t *pairTable) id(str string) int32 {
	if i, ok := t.strs[str]; ok {
		return i
	}
	i := int32(len(t.strs))
	t.strs[str] = i
	return i
}

// idOf interns the bytes b.
func (t *pairTable) idOf(b []byte) int32 {
	if i, ok := t.strs[string(b)]; ok {
		return i
	}
	return t.id(string(b))
}

// stack returns the stack identity of site: one per distinct list of
// locations.
func (t *pairTable) stack(site *track.Site) int32 {
	if id, ok := t.stackID[site]; ok {
		return id
	}
	t.buf = t.buf[:0]
	for _, loc := range t.st.site(site) {
		t.buf = binary.AppendUvarint(t.buf, loc.ID)
	}
	id, ok := t.stacks[string(t.buf)]
	if !ok {
		id = int32(len(t.stacks))
		t.stacks[string(t.buf)] = id
	}
	t.stackID[site] = id
	return id
}

// add adds sign times v to the sample key identifies, made from g or site
// when it is new.
func (t *pairTable) add(k pairKey, e pairEntry, sign int64) {
	i, ok := t.byKey[k]
	if !ok {
		i = int32(len(t.entries))
		t.byKey[k] = i
		t.entries = append(t.entries, e)
		t.entries[i].v = [numValues]int64{}
	}
	for j := range e.v {
		t.entries[i].v[j] += sign * e.v[j]
	}
}

// live and site return the eachSample callbacks that add a snapshot's
// samples with sign.
func (t *pairTable) live(sign int64) func(g *track.Group, leaked bool, v [numValues]int64) {
	return func(g *track.Group, leaked bool, v [numValues]int64) {
		k := pairKey{stack: t.stack(g.Site), dtype: t.id(g.DType), device: t.id(g.Device), kind: t.id(g.Kind),
			shape: t.id(shapeOf(t.shapes, g.Shape)), held: t.id(heldOf(t.held, g.HeldBy)), leaked: leaked}
		if g.Count > 0 {
			k.perTensor = g.Bytes / g.Count
		}
		// The request labels kept, as written: renamed, in order.
		t.kept = t.kept[:0]
		g.Labels.Range(func(name, value string) bool {
			if t.cfg.keepsLabel(name) && value != "" {
				t.kept = append(append(t.kept, renamedOf(t.renamed, name)...), 0)
				t.kept = append(append(t.kept, value...), 0)
			}
			return true
		})
		k.labels = t.idOf(t.kept)
		t.add(k, pairEntry{g: g, site: g.Site, leaked: leaked, v: v}, sign)
	}
}

func (t *pairTable) site(sign int64) func(site *track.Site, v [numValues]int64) {
	return func(site *track.Site, v [numValues]int64) {
		t.add(pairKey{stack: t.stack(site), site: true}, pairEntry{site: site, v: v}, sign)
	}
}

// streamPair writes what combine(before, after, what, cfg) makes,
// uncompressed, onto w, without building it (see pairTable).
func streamPair(w io.Writer, before, after *track.Snapshot, what string, cfg config) error {
	if err := checkPair(before, after, what); err != nil {
		return err
	}
	withAlloc, perSite := pairSamples(before, after)
	// Sized for the larger side: the two share most of their samples.
	t := newPairTable(&cfg, max(countSamples(before, perSite), countSamples(after, perSite)))
	eachSample(before, groupsOf(before), withAlloc, perSite, t.live(-1), t.site(-1))
	eachSample(after, groupsOf(after), withAlloc, perSite, t.live(+1), t.site(+1))
	t.byKey, t.strs = nil, nil // done with: let the writing reuse their memory

	s := newStreamer(w, &cfg)
	for i := range t.entries {
		e := &t.entries[i]
		switch {
		case e.v == [numValues]int64{}: // cancelled out, as profile.Merge drops it
		case e.g != nil:
			s.live(e.g, e.leaked, e.v)
		default:
			s.site(e.site, e.v)
		}
	}
	var at int64
	if !before.Time.IsZero() {
		at = before.Time.UnixNano()
	}
	return s.finish(at, after.Time.Sub(before.Time).Nanoseconds(), pairComments(before, after, what))
}

// shapeOf renders a shape once per distinct shape of up to eight
// dimensions, in cache.
func shapeOf(cache map[shapeKey]string, shape []int) string {
	var k shapeKey
	if len(shape) > len(k.dims) {
		return format.Shape(shape)
	}
	k.rank = len(shape)
	copy(k.dims[:], shape)
	if str, ok := cache[k]; ok {
		return str
	}
	str := format.Shape(shape)
	cache[k] = str
	return str
}

// heldOf renders the extra owner of a group once per owner, in cache; ""
// for none.
func heldOf(cache map[track.Holder]string, h *track.Holder) string {
	if h == nil {
		return ""
	}
	if str, ok := cache[*h]; ok {
		return str
	}
	str := h.String()
	cache[*h] = str
	return str
}

// renamedOf returns the name a request label key is written under, once
// per key, in cache.
func renamedOf(cache map[string]string, key string) string {
	if n, ok := cache[key]; ok {
		return n
	}
	n := labelName(key)
	cache[key] = n
	return n
}
