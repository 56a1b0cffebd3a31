package track

import "sync"

// maxOOMDevices bounds the devices whose refused allocations are counted
// apart; those of further devices are counted together, and every device's
// reading includes them (OutOfMemoryOn), so that no refusal is lost.
const maxOOMDevices = 64

// oomBook counts, per device, the allocations refused for lack of memory:
// the fact a growth watcher reads to tell that the memory a suspect draws
// from ran out. Only the out-of-memory path and a watcher's window end take
// its lock, each for one map access: an allocation that succeeds never
// touches it.
type oomBook struct {
	mu       sync.Mutex
	byDevice map[string]int64
	others   int64 // refusals on devices past maxOOMDevices
}

// NoteOutOfMemory counts an allocation of bytes on device that failed for
// lack of memory, at site (nil if unknown): the event EventOOM, and the
// device's count that OutOfMemoryOn reads. tensor.New calls it; an
// allocator of another module that fails outside tensor.New may too. Safe
// for concurrent use.
func (bk *Books) NoteOutOfMemory(device string, site *Site, bytes int64) {
	t := (*Tracker)(bk)
	t.note(Event{Kind: EventOOM, Bytes: bytes, Site: site, Device: device}, false)
	b := &t.ooms
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.byDevice[device]; !ok && len(b.byDevice) >= maxOOMDevices {
		b.others++
		return
	}
	if b.byDevice == nil {
		b.byDevice = make(map[string]int64)
	}
	b.byDevice[device]++
}

// OutOfMemoryOn returns how many allocations on device failed for lack of
// memory since t was made (NoteOutOfMemory), those of devices past the
// bound of 64 devices included. It only grows. Safe for concurrent use.
func (bk *Books) OutOfMemoryOn(device string) int64 {
	t := (*Tracker)(bk)
	b := &t.ooms
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.byDevice[device] + b.others
}
