package pprofexport

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"io"
	"iter"
	"slices"

	"github.com/google/pprof/profile"

	"github.com/tensorlife/tensorlife/track"
)

// The writers of one snapshot (Write, WriteFile, the handler's profile)
// encode the profile as they read the snapshot, sample by sample, rather
// than build a profile.Profile and encode that: a profile.Profile holds a
// label map per sample and its encoder a copy of every sample, which made
// a profile that shows a request id per group (LabelKeys("request"), 200k
// ids) allocate about 3 KiB per sample, over a thousand times the bytes it
// wrote. Streamed, a sample costs nothing it keeps: each string goes into
// the file's string table as it is first needed, between the samples, and
// only strings bounded by the sites (names, files, attributes) are
// remembered, so a request label's values, one per group, cost no memory;
// the stacks, bounded by the sites, are built as for Profile. The file is
// the same profile: Profile's samples, labels, locations and functions, in
// the same order; only the order of the message's fields differs (the
// string table is spread among them, and a label value may recur in it),
// which the protocol buffer and profile formats allow and every reader
// accepts.

// Field numbers of profile.proto that the stream writes.
const (
	fieldSampleType        = 1
	fieldSample            = 2
	fieldMapping           = 3
	fieldLocation          = 4
	fieldFunction          = 5
	fieldStringTable       = 6
	fieldTimeNanos         = 9
	fieldDurationNanos     = 10
	fieldPeriodType        = 11
	fieldPeriod            = 12
	fieldComment           = 13
	fieldDefaultSampleType = 14
	fieldDocURL            = 15

	wireVarint = 0
	wireBytes  = 2

	// flushBytes is how much encoded profile the stream gathers before it
	// hands it to the compressor.
	flushBytes = 32 << 10
)

// streamer encodes one profile onto w.
type streamer struct {
	w    io.Writer
	out  []byte // encoded, not yet written
	msg  []byte // the message being encoded
	sub  []byte // a message inside it
	err  error
	strs map[string]int64
	// strings is how many strings the table has: each is written as it is
	// added (see intern).
	strings int64

	st      *stacks
	cfg     *config
	shapes  map[shapeKey]string
	held    map[track.Holder]string
	renamed map[string]string
	kept    []string // the request labels of the sample being written
	// values caches the indexes of recent request label values (see
	// internValue), by a hash of the value.
	values *[valueSlots]tableEntry
	// last holds what the last live sample shares with the next ones of
	// a run (one site, one kind of tensor, a request id each), encoded.
	last lastSample
}

// lastSample is the encoding of the last live sample's stack and its
// tensors' attribute labels, with what they were encoded of: a sample of
// the same is written with them as they are, its strings in the table
// already.
type lastSample struct {
	site                *track.Site
	locations           []byte // the stack's field
	attrsValid          bool
	kind, device, dtype string
	shape               []int
	other, leaked       bool
	held                *track.Holder
	attrs               []byte // the attributes' label fields
}

// valueSlots is how many request label values a streamer remembers: enough
// for the values groups share (models, routes, tenants) to be written
// once, in 96 KiB whatever the profile's size.
const valueSlots = 4096

// tableEntry is a string and its index in the string table.
type tableEntry struct {
	str string
	idx int64
}

// valueSeed hashes request label values for the streamer's cache.
var valueSeed = maphash.MakeSeed()

// shapeKey identifies a shape of up to eight dimensions without rendering
// it.
type shapeKey struct {
	rank int
	dims [8]int
}

// stream writes the profile of snap that build(snap, cfg, allocSites(snap),
// false) makes, uncompressed, onto w.
func stream(w io.Writer, snap *track.Snapshot, cfg config) error {
	return streamGroups(w, snap, groupsOf(snap), cfg)
}

// streamGroups is stream for a snapshot whose groups are read from groups
// (track.Books.GroupsOf), each written as it is read.
func streamGroups(w io.Writer, snap *track.Snapshot, groups iter.Seq[*track.Group], cfg config) error {
	s := newStreamer(w, &cfg)
	eachSample(snap, groups, allocSites(snap), false, s.live, s.site)
	var at int64
	if !snap.Time.IsZero() {
		at = snap.Time.UnixNano()
	}
	return s.finish(at, 0, comments(snap))
}

// newStreamer returns a streamer onto w.
func newStreamer(w io.Writer, cfg *config) *streamer {
	// The strings are about one per group that differs by a label value.
	// Those values are not kept (see internValue): the map holds the
	// profile's other strings, bounded by its sites, so a profile of a
	// million request ids costs no string table of its own.
	s := &streamer{w: w, strs: make(map[string]int64, 64), cfg: cfg,
		st: newStacks(newProfile(), cfg.keepLibrary), shapes: map[shapeKey]string{}, held: map[track.Holder]string{},
		renamed: map[string]string{}, out: make([]byte, 0, flushBytes+4096), values: new([valueSlots]tableEntry)}
	s.intern("") // index 0, as the format asks
	return s
}

// finish writes what follows the samples: the stacks they use and the
// profile's header fields (timeNanos and durationNanos when not 0).
func (s *streamer) finish(timeNanos, durationNanos int64, comments []string) error {
	p := s.st.p
	for _, m := range p.Mapping {
		s.mapping(m)
	}
	for _, l := range p.Location {
		s.location(l)
	}
	for _, f := range p.Function {
		s.function(f)
	}
	for _, vt := range p.SampleType {
		s.valueType(fieldSampleType, vt)
	}
	s.out = appendVarintOpt(s.out, fieldTimeNanos, uint64(timeNanos))
	s.out = appendVarintOpt(s.out, fieldDurationNanos, uint64(durationNanos))
	s.valueType(fieldPeriodType, p.PeriodType)
	s.out = appendVarintField(s.out, fieldPeriod, uint64(p.Period))
	for _, c := range comments {
		s.out = appendVarintField(s.out, fieldComment, uint64(s.intern(c)))
	}
	s.out = appendVarintField(s.out, fieldDefaultSampleType, uint64(s.intern(p.DefaultSampleType)))
	s.out = appendVarintField(s.out, fieldDocURL, uint64(s.intern(p.DocURL)))
	s.flush()
	if s.err != nil {
		return fmt.Errorf("pprofexport: write profile: %w", s.err)
	}
	return nil
}

// intern returns the index of str in the string table, adding it.
func (s *streamer) intern(str string) int64 {
	if i, ok := s.strs[str]; ok {
		return i
	}
	i := s.add(str)
	s.strs[str] = i
	return i
}

// add writes str as the string table's next entry and returns its index.
// The entry goes out at once, between the messages that come before and
// after it: a repeated field may be spread over the message so, and every
// protocol buffer reader (go tool pprof's among them) gathers it whole, in
// order, before it looks an index up.
func (s *streamer) add(str string) int64 {
	s.out = appendTag(s.out, fieldStringTable, wireBytes)
	s.out = binary.AppendUvarint(s.out, uint64(len(str)))
	s.out = append(s.out, str...)
	s.strings++
	return s.strings - 1
}

// internValue returns the index of a request label's value in the string
// table, adding it unless the cache of recent values or the table's other
// strings hold it already. A value may be one per group (a request id):
// such values cost their table entry in the file and nothing in memory,
// and a value that recurs past the cache's memory is written again, which
// the format allows (a string table need not be unique) and every reader
// accepts.
func (s *streamer) internValue(str string) int64 {
	c := &s.values[maphash.String(valueSeed, str)%valueSlots]
	if c.idx != 0 && c.str == str {
		return c.idx
	}
	i, ok := s.strs[str]
	if !ok {
		i = s.add(str)
	}
	*c = tableEntry{str: str, idx: i}
	return i
}

// live writes the in-use sample of the tensors of g that leaked, or of
// those that did not, with the labels Profile gives it.
func (s *streamer) live(g *track.Group, leaked bool, v [numValues]int64) {
	last := &s.last
	if g.Site != last.site || last.locations == nil {
		last.site, last.locations = g.Site, s.locationIDs(last.locations[:0], g.Site)
	}
	s.msg = append(s.msg[:0], last.locations...)
	s.msg = appendValues(s.msg, &s.sub, v)
	s.kept = s.kept[:0]
	g.Labels.Range(func(name, value string) bool {
		if s.cfg.keepsLabel(name) {
			s.kept = append(s.kept, s.rename(name), value)
		}
		return true
	})
	if !last.attrsValid || g.Kind != last.kind || g.Device != last.device || g.DType != last.dtype ||
		g.OtherShapes != last.other || leaked != last.leaked || g.HeldBy != last.held ||
		!slices.Equal(g.Shape, last.shape) {
		// The attributes come first (eachLabel): encoded alone, they are
		// the bytes a sample of them begins its labels with.
		shape := OtherShapes
		if !g.OtherShapes {
			shape = s.shape(g.Shape)
		}
		last.attrs = last.attrs[:0]
		eachLabel(g, leaked, shape, s.heldBy(g.HeldBy), nil, func(key, value string) {
			s.sub = appendVarintField(s.sub[:0], 1, uint64(s.intern(key)))
			s.sub = appendVarintField(s.sub, 2, uint64(s.intern(value))) // few values, kept in the map
			last.attrs = appendMessage(last.attrs, 3, s.sub)
		})
		*last = lastSample{site: last.site, locations: last.locations, attrsValid: true, kind: g.Kind,
			device: g.Device, dtype: g.DType, shape: append(last.shape[:0], g.Shape...), other: g.OtherShapes,
			leaked: leaked, held: g.HeldBy, attrs: last.attrs}
	}
	s.msg = append(s.msg, last.attrs...)
	for i := 0; i+1 < len(s.kept); i += 2 {
		if s.kept[i+1] == "" {
			continue // as eachLabel leaves it out
		}
		s.sub = appendVarintField(s.sub[:0], 1, uint64(s.intern(s.kept[i])))
		s.sub = appendVarintField(s.sub, 2, uint64(s.internValue(s.kept[i+1])))
		s.msg = appendMessage(s.msg, 3, s.sub)
	}
	if g.Count > 0 && !g.OtherShapes { // the other shapes' tensors differ in size
		if per := g.Bytes / g.Count; per != 0 {
			s.sub = appendVarintField(s.sub[:0], 1, uint64(s.intern(LabelBytes)))
			s.sub = appendVarintField(s.sub, 3, uint64(per))
			s.sub = appendVarintField(s.sub, 4, uint64(s.intern("bytes")))
			s.msg = appendMessage(s.msg, 3, s.sub)
		}
	}
	s.out = appendMessage(s.out, fieldSample, s.msg)
	s.flushIfFull()
}

// site writes a site's sample: alloc values, no labels.
func (s *streamer) site(site *track.Site, v [numValues]int64) {
	s.msg = s.locationIDs(s.msg[:0], site)
	s.msg = appendValues(s.msg, &s.sub, v)
	s.out = appendMessage(s.out, fieldSample, s.msg)
	s.flushIfFull()
}

// locationIDs appends the packed location ids of site's stack to b.
func (s *streamer) locationIDs(b []byte, site *track.Site) []byte {
	s.sub = s.sub[:0]
	for _, loc := range s.st.site(site) {
		s.sub = binary.AppendUvarint(s.sub, loc.ID)
	}
	return appendMessage(b, 1, s.sub)
}

// appendValues appends a sample's packed values to b, using sub as
// scratch.
func appendValues(b []byte, sub *[]byte, v [numValues]int64) []byte {
	*sub = (*sub)[:0]
	for _, x := range v {
		*sub = binary.AppendUvarint(*sub, uint64(x))
	}
	return appendMessage(b, 2, *sub)
}

// rename returns the name a request label key is written under.
func (s *streamer) rename(key string) string { return renamedOf(s.renamed, key) }

// shape renders a shape.
func (s *streamer) shape(shape []int) string { return shapeOf(s.shapes, shape) }

// heldBy renders the extra owner of a group; "" for none.
func (s *streamer) heldBy(h *track.Holder) string { return heldOf(s.held, h) }

func (s *streamer) mapping(m *profile.Mapping) {
	b := s.msg[:0]
	b = appendVarintOpt(b, 1, m.ID)
	b = appendVarintOpt(b, 2, m.Start)
	b = appendVarintOpt(b, 3, m.Limit)
	b = appendVarintOpt(b, 4, m.Offset)
	b = appendVarintOpt(b, 5, uint64(s.intern(m.File)))
	b = appendVarintOpt(b, 6, uint64(s.intern(m.BuildID)))
	b = appendBoolOpt(b, 7, m.HasFunctions)
	b = appendBoolOpt(b, 8, m.HasFilenames)
	b = appendBoolOpt(b, 9, m.HasLineNumbers)
	b = appendBoolOpt(b, 10, m.HasInlineFrames)
	s.msg = b
	s.out = appendMessage(s.out, fieldMapping, b)
	s.flushIfFull()
}

func (s *streamer) location(l *profile.Location) {
	b := s.msg[:0]
	b = appendVarintOpt(b, 1, l.ID)
	if l.Mapping != nil {
		b = appendVarintOpt(b, 2, l.Mapping.ID)
	}
	b = appendVarintOpt(b, 3, l.Address)
	for _, ln := range l.Line {
		sub := s.sub[:0]
		if ln.Function != nil {
			sub = appendVarintOpt(sub, 1, ln.Function.ID)
		}
		sub = appendVarintOpt(sub, 2, uint64(ln.Line))
		sub = appendVarintOpt(sub, 3, uint64(ln.Column))
		s.sub = sub
		b = appendMessage(b, 4, sub)
	}
	b = appendBoolOpt(b, 5, l.IsFolded)
	s.msg = b
	s.out = appendMessage(s.out, fieldLocation, b)
	s.flushIfFull()
}

func (s *streamer) function(f *profile.Function) {
	b := s.msg[:0]
	b = appendVarintOpt(b, 1, f.ID)
	b = appendVarintOpt(b, 2, uint64(s.intern(f.Name)))
	b = appendVarintOpt(b, 3, uint64(s.intern(f.SystemName)))
	b = appendVarintOpt(b, 4, uint64(s.intern(f.Filename)))
	b = appendVarintOpt(b, 5, uint64(f.StartLine))
	s.msg = b
	s.out = appendMessage(s.out, fieldFunction, b)
	s.flushIfFull()
}

func (s *streamer) valueType(field int, vt *profile.ValueType) {
	if vt == nil {
		return
	}
	b := s.msg[:0]
	b = appendVarintOpt(b, 1, uint64(s.intern(vt.Type)))
	b = appendVarintOpt(b, 2, uint64(s.intern(vt.Unit)))
	s.msg = b
	s.out = appendMessage(s.out, field, b)
}

func (s *streamer) flushIfFull() {
	if len(s.out) >= flushBytes {
		s.flush()
	}
}

// flush hands what is encoded to w; after an error it only drops it.
func (s *streamer) flush() {
	if s.err == nil && len(s.out) > 0 {
		_, s.err = s.w.Write(s.out)
	}
	s.out = s.out[:0]
}

func appendTag(b []byte, field, wire int) []byte {
	return binary.AppendUvarint(b, uint64(field)<<3|uint64(wire))
}

func appendVarintField(b []byte, field int, v uint64) []byte {
	return binary.AppendUvarint(appendTag(b, field, wireVarint), v)
}

// appendVarintOpt leaves out a zero value, as proto3 does.
func appendVarintOpt(b []byte, field int, v uint64) []byte {
	if v == 0 {
		return b
	}
	return appendVarintField(b, field, v)
}

func appendBoolOpt(b []byte, field int, v bool) []byte {
	if !v {
		return b
	}
	return appendVarintField(b, field, 1)
}

func appendMessage(b []byte, field int, msg []byte) []byte {
	b = appendTag(b, field, wireBytes)
	b = binary.AppendUvarint(b, uint64(len(msg)))
	return append(b, msg...)
}
