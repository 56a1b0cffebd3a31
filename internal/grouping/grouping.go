// Package grouping is the engine under a tracker's snapshots: a table that
// counts records into groups by an identity its caller hashes and
// compares, in memory bounded by the groups, and a sort of the groups that
// stays fast where most of them differ by one label value alone (a profile
// by request ids).
//
// The caller (package track) owns what a group is: its entry type, how two
// records are the same group, and how groups are ordered, which it states
// as methods of the entry (Entry) and of the entry's class (Class). The
// table keeps the entries in chunks that never move and finds them through
// an open-addressed index of their positions, so a snapshot of 200k groups
// costs its entries and a 4-byte slot each, not a map of keys.
//
// A Table is not safe for concurrent use; it is filled by one goroutine and
// read after.
package grouping

import (
	"cmp"
	"slices"
)

// Entry is what the table keeps of a group, P being *E.
type Entry[E any, C Class[C]] interface {
	*E
	// Hash returns the hash the entry was added by (Table.Find's h),
	// which the entry keeps.
	Hash() uint32
	// Class returns what the entry shares with entries alike in every
	// field Compare reads before the labels.
	Class() C
	// Tie returns the value of the entry's one label, false if it has no
	// label or more than one.
	Tie() (string, bool)
	// Compare orders two entries: the order Sorted gives.
	Compare(*E) int
}

// Class is what entries alike up to their labels share. Compare orders
// classes as Entry.Compare orders their entries.
type Class[C any] interface {
	comparable
	Compare(C) int
}

// chunk is how many entries a chunk holds.
const chunk = 1024

// Table counts records into groups: Find returns a group's entry, added
// empty the first time. The zero Table is empty and ready to use.
type Table[E any, C Class[C], P Entry[E, C]] struct {
	index  []int32 // entry position + 1 by hash, 0 empty; at most half full
	chunks [][]E
	n      int32
}

// Len returns how many entries the table holds.
func (t *Table[E, C, P]) Len() int { return int(t.n) }

// At returns the entry at position i, 0 <= i < Len, in the order entries
// were added.
func (t *Table[E, C, P]) At(i int32) *E { return &t.chunks[i/chunk][i%chunk] }

// Find returns the entry of hash h that same reports as the one sought,
// and false; or, when there is none, a new zero entry placed by h, and
// true: the caller fills it, its Hash returning h. Only the low 32 bits of
// a hash place an entry: a table never has 2³² slots.
func (t *Table[E, C, P]) Find(h uint32, same func(*E) bool) (e *E, added bool) {
	if int(t.n) >= len(t.index)/2 {
		t.grow()
	}
	mask := uint32(len(t.index) - 1)
	slot := h & mask
	for ; t.index[slot] != 0; slot = (slot + 1) & mask {
		if e := t.At(t.index[slot] - 1); P(e).Hash() == h && same(e) {
			return e, false
		}
	}
	i := t.n
	if int(i/chunk) == len(t.chunks) {
		t.chunks = append(t.chunks, make([]E, chunk))
	}
	t.n++
	t.index[slot] = i + 1
	return t.At(i), true
}

// grow doubles the index (or makes its first), placing each entry again
// by its hash.
func (t *Table[E, C, P]) grow() {
	index := make([]int32, max(2*len(t.index), 64))
	mask := uint32(len(index) - 1)
	for i := range t.n {
		slot := P(t.At(i)).Hash() & mask
		for index[slot] != 0 {
			slot = (slot + 1) & mask
		}
		index[slot] = i + 1
	}
	t.index = index
}

// Seal drops the index: entries are found by position from now on (At,
// Sorted), never by hash, and Find must not be called again.
func (t *Table[E, C, P]) Seal() { t.index = nil }

// Release drops the entries and the index: the table is empty.
func (t *Table[E, C, P]) Release() { t.index, t.chunks, t.n = nil, nil, 0 }

// Key is an entry to sort: its position, the rank of its class and a
// prefix of what breaks its ties (see Sorted).
type Key struct {
	tie   uint64
	At    int32  // the entry's position (Table.At)
	class uint32 // 0 when the entries are not ranked
}

// MinSortClasses is how many classes Sorted ranks at least, however few
// the entries; past an eighth of the entries, or this, it ranks none, and
// entries are compared whole.
const MinSortClasses = 1 << 12

// Sorted returns the entries' positions in the order of Entry.Compare.
// ties says that the entries are told apart by one label key at most, so
// that Tie's values break the ties of a class.
//
// A sort that compares entries reads two of them at random each time,
// which took most of its time. Entries first fall into classes (Class):
// most groups of a profile by request ids share a few. Each key carries
// its class's rank in that order, so that entries of two classes are
// ordered by their keys alone. Past MinSortClasses classes and an eighth
// of the entries, the keys carry none: the map of classes would cost more
// than the sort saves.
//
// Within a class, where groups are told apart by one label key (a request
// id), most of them tie on everything but its value, and comparing values
// that sit behind two pointers each took most of the sort. Each key then
// carries eight bytes of its value, after the prefix every value shares,
// big-end first and padded with zeros: two groups of a class that differ
// in those bytes are ordered by them, as comparing the values would order
// them, and any other pair is compared whole.
func (t *Table[E, C, P]) Sorted(ties bool) []Key {
	keys := make([]Key, t.n)
	for i := range keys {
		keys[i].At = int32(i)
	}
	ranked := t.rank(keys)
	if ties {
		// One pass reads each tie past the prefix shared so far, and a
		// second reads again those read before it last shrank (below
		// redo): most of the time a few, not every value twice.
		shared := -1 // the length of the prefix all values share
		var first string
		redo := 0
		for i := range keys {
			v, ok := P(t.At(int32(i))).Tie()
			switch {
			case !ok:
				continue
			case shared < 0:
				first, shared = v, len(v)
			default:
				n, j := min(shared, len(v)), 0
				for j < n && v[j] == first[j] {
					j++
				}
				if j < shared {
					shared, redo = j, i
				}
			}
			keys[i].tie = prefix8(v[shared:])
		}
		for i := range keys[:redo] {
			if v, ok := P(t.At(int32(i))).Tie(); ok {
				keys[i].tie = prefix8(v[shared:])
			}
		}
	}
	if ranked {
		slices.SortFunc(keys, func(a, b Key) int {
			if a.class != b.class {
				return cmp.Compare(a.class, b.class)
			}
			if ties && a.tie != b.tie {
				return cmp.Compare(a.tie, b.tie) // of one class, told apart by their values' bytes
			}
			return P(t.At(a.At)).Compare(t.At(b.At))
		})
		return keys
	}
	slices.SortFunc(keys, func(a, b Key) int {
		ea, eb := P(t.At(a.At)), P(t.At(b.At))
		if ties && a.tie != b.tie && ea.Class() == eb.Class() {
			return cmp.Compare(a.tie, b.tie) // of one class, told apart by their values' bytes
		}
		return ea.Compare(t.At(b.At))
	})
	return keys
}

// rank sets the class rank of each key, reporting false, with none set,
// where the entries fall into too many classes (see Sorted). Classes that
// compare equal share a rank.
func (t *Table[E, C, P]) rank(keys []Key) bool {
	limit := max(MinSortClasses, len(keys)/8)
	index := make(map[C]uint32)
	var classes []C
	var last C
	lastAt := uint32(0)
	for i := range keys {
		c := P(t.At(keys[i].At)).Class()
		if i == 0 || c != last {
			at, ok := index[c]
			if !ok {
				if len(classes) == limit {
					for j := range keys[:i] {
						keys[j].class = 0
					}
					return false
				}
				at = uint32(len(classes))
				index[c] = at
				classes = append(classes, c)
			}
			last, lastAt = c, at
		}
		keys[i].class = lastAt
	}
	order := make([]uint32, len(classes))
	for i := range order {
		order[i] = uint32(i)
	}
	slices.SortFunc(order, func(a, b uint32) int { return classes[a].Compare(classes[b]) })
	ranks := make([]uint32, len(classes))
	r := uint32(0)
	for i, c := range order {
		if i > 0 && classes[order[i-1]].Compare(classes[c]) != 0 {
			r++
		}
		ranks[c] = r
	}
	for i := range keys {
		keys[i].class = ranks[keys[i].class]
	}
	return true
}

// prefix8 returns the first eight bytes of s as a big-endian number, zeros
// past its end: prefix8(a) < prefix8(b) only where a < b.
func prefix8(s string) uint64 {
	var p uint64
	for i := range 8 {
		p <<= 8
		if i < len(s) {
			p |= uint64(s[i])
		}
	}
	return p
}

// Mix folds x into the hash h: how a caller combines the hashes of an
// identity's parts without allocating.
func Mix(h, x uint64) uint64 {
	h ^= x + 0x9e3779b97f4a7c15 + h<<6 + h>>2
	return h * 0xff51afd7ed558ccd
}
