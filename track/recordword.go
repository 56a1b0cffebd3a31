package track

// A Record's word packs what changes over its life into one atomic, so that
// a transition (live to released, own handle dropped, handed over) is one
// compare-and-swap or one Or, and a live tensor stays within 256 B:
//
//	bits 0..1   the state: stateNew, stateLive, stateReleased (stateMask)
//	bit  2      leakedFlag: a handle was found dropped without Free
//	bit  3      ownDropped: the own handle was reported dropped, once only
//	bit  4      outlivedFlag: its site counts it as outlived
//	bit  5      handedFlag: handed to an Owner
//	bit  6      totalFlag: counted in the tracker-wide live total
//	bits 8..14  its slot at its site (counted.go), otherSlot past the bound
//	bit  15     specialFlag: counted apart in its shard's special set
//	bits 16..31 the index of its device and kind in its shard (classShift)
//
// Every bit of the word is named here and nowhere else.

const (
	stateNew uint32 = iota
	stateLive
	stateReleased

	stateMask  = 3
	leakedFlag = 4
	ownDropped = 8 // the own handle was reported dropped: once only
	// outlivedFlag: r was made under no request, or handed to an owner
	// without a bound, and its site counts it as outlived (a record made
	// under a request is outlived once the request ends: outlived()).
	outlivedFlag = 16
	handedFlag   = 32 // handed to an Owner (HandOver)
	// totalFlag marks a record counted in the tracker-wide live total
	// (made before the tracker spread its counters): its release takes
	// it out again.
	totalFlag  = 64
	classShift = 16
)

func (r *Record) state() uint32 { return r.word.Load() & stateMask }
func (r *Record) leaked() bool  { return r.word.Load()&leakedFlag != 0 }

// setLeaked flags r leaked.
func (r *Record) setLeaked() { r.word.Or(leakedFlag) }

const (
	otherSlot   = 0x7f
	slotShift   = 8 // a record's slot in its word: bits 8..14
	slotMask    = 0x7f << slotShift
	specialFlag = 1 << 15 // counted apart in its shard's special set
)
