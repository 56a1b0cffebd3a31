package tensor

import (
	"fmt"
	"sync"

	"github.com/tensorlife/tensorlife/internal/format"
)

// hostShift splits a host DevicePtr into a block id (high bits) and an offset
// (low bits): blocks of up to 1 TiB, up to 2^23 blocks live at once. Ids are
// reused after Free, so a long-running process never runs out.
const hostShift = 40

// maxHostBlocks bounds live host blocks so ids fit above hostShift.
const maxHostBlocks = 1<<(64-hostShift-1) - 1

// HostDevice is device memory made of Go memory with a fixed capacity: it
// behaves like a GPU of that size. Copies move real bytes, allocation past
// capacity fails with an error matching ErrOutOfMemory, and MemInfo reports
// free and total bytes. It is the device that tests, examples and CI use.
//
// Pointers are opaque addresses, not Go pointers: a HostDevice checks each
// one it is handed and refuses pointers it did not hand out. A HostDevice is
// safe for concurrent use; copies of distinct blocks run in parallel.
type HostDevice struct {
	name     string
	capacity int64

	mu     sync.RWMutex
	used   int64
	blocks blockTable
	// freeIDs are reused first in, first out, so that a stale pointer to a
	// freed block points at nothing for as long as possible and is refused
	// as invalid, rather than landing in the next block allocated.
	freeIDs []uint64
	nextID  uint64

	// adoptions is the foreign memory adopted on the device
	// (tensor/foreign), so that no memory of it is adopted twice.
	adoptions LiveAdoptions
}

// Adoptions returns the device's record of the foreign memory adopted on
// it (AdoptionKeeper).
func (d *HostDevice) Adoptions() *LiveAdoptions { return &d.adoptions }

// liveLocked returns the number of blocks allocated and not freed: every
// id handed out (1 to nextID-1) is either a live block's, reserved by
// Alloc, or waiting in freeIDs. The caller holds d.mu.
func (d *HostDevice) liveLocked() int { return int(max(d.nextID, 1)-1) - len(d.freeIDs) }

// NewHostDevice returns a host device of capacityBytes (> 0). Its name is
// "host" unless DeviceName says otherwise.
func NewHostDevice(capacityBytes int64, opts ...Option) (*HostDevice, error) {
	if capacityBytes <= 0 {
		return nil, fmt.Errorf("%w: host device capacity %d", ErrInvalidSize, capacityBytes)
	}
	cfg := config{name: "host"}
	if err := applyOptions(&cfg, opts); err != nil {
		return nil, err
	}
	return &HostDevice{name: cfg.name, capacity: capacityBytes, nextID: 1}, nil
}

// Name returns the device's name: "host", or the name given by DeviceName.
func (d *HostDevice) Name() string { return d.name }

// Alloc reserves bytes of the device's capacity.
func (d *HostDevice) Alloc(bytes int64) (DevicePtr, error) {
	if bytes <= 0 {
		return 0, d.err("alloc", bytes, ErrInvalidSize)
	}
	if bytes > 1<<hostShift {
		return 0, d.err("alloc", bytes, fmt.Errorf("%w: a host block holds at most 1 TiB", ErrOutOfMemory))
	}
	d.mu.Lock()
	if bytes > d.capacity-d.used {
		free := d.capacity - d.used
		d.mu.Unlock()
		return 0, d.err("alloc", bytes, fmt.Errorf("%w: %s free of %s", ErrOutOfMemory, format.Bytes(free), format.Bytes(d.capacity)))
	}
	if d.liveLocked() >= maxHostBlocks {
		d.mu.Unlock()
		return 0, d.err("alloc", bytes, fmt.Errorf("%w: too many live blocks", ErrOutOfMemory))
	}
	d.used += bytes
	var id uint64
	if len(d.freeIDs) > 0 && (len(d.freeIDs) > 1024 || d.nextID > maxHostBlocks) {
		// Reuse only once many ids wait: stale pointers stay invalid long.
		id, d.freeIDs = d.freeIDs[0], d.freeIDs[1:]
	} else {
		id = d.nextID
		d.nextID++
	}
	// id is reserved: its slot stays nil until filled, outside the lock
	d.mu.Unlock()

	mem := make([]byte, bytes) // zeroing large blocks must not hold the lock

	d.mu.Lock()
	*d.blocks.slot(id) = mem
	d.mu.Unlock()
	return DevicePtr(id << hostShift), nil
}

// Free returns a block from Alloc; bytes must be the size allocated.
func (d *HostDevice) Free(p DevicePtr, bytes int64) error {
	id, off := uint64(p)>>hostShift, uint64(p)&(1<<hostShift-1)
	d.mu.Lock()
	defer d.mu.Unlock()
	slot := d.blocks.find(id)
	if off != 0 || slot == nil || *slot == nil {
		return d.err("free", bytes, fmt.Errorf("%w: %#x", ErrInvalidPointer, uintptr(p)))
	}
	if int64(len(*slot)) != bytes {
		return d.err("free", bytes, fmt.Errorf("%w: block %#x holds %d bytes", ErrSizeMismatch, uintptr(p), len(*slot)))
	}
	*slot = nil
	d.freeIDs = append(d.freeIDs, id)
	d.used -= bytes
	return nil
}

// MemInfo reports free and total bytes.
func (d *HostDevice) MemInfo() (free, total int64, err error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.capacity - d.used, d.capacity, nil
}

// Used returns the bytes currently allocated.
func (d *HostDevice) Used() int64 {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.used
}

// Blocks returns the number of live allocations.
func (d *HostDevice) Blocks() int {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.liveLocked()
}

// CopyToDevice copies src into the block at dst.
func (d *HostDevice) CopyToDevice(dst DevicePtr, src []byte) error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	mem, err := d.span("copy to device", dst, int64(len(src)))
	if err != nil {
		return err
	}
	copy(mem, src)
	return nil
}

// CopyToHost copies len(dst) bytes from the block at src.
func (d *HostDevice) CopyToHost(dst []byte, src DevicePtr) error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	mem, err := d.span("copy to host", src, int64(len(dst)))
	if err != nil {
		return err
	}
	copy(dst, mem)
	return nil
}

// Memset sets bytes bytes at dst to value.
func (d *HostDevice) Memset(dst DevicePtr, value byte, bytes int64) error {
	if bytes < 0 {
		return d.err("memset", bytes, ErrInvalidSize)
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	mem, err := d.span("memset", dst, bytes)
	if err != nil {
		return err
	}
	for i := range mem {
		mem[i] = value
	}
	return nil
}

// HostBytes returns the n bytes at p as the Go memory of their block
// (HostMemory): code on the host reads and writes the device's memory in
// place. n == 0 returns an empty slice for any p.
func (d *HostDevice) HostBytes(p DevicePtr, n int64) ([]byte, error) {
	if n < 0 {
		return nil, d.err("host bytes", n, ErrInvalidSize)
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	mem, err := d.span("host bytes", p, n)
	if err != nil {
		return nil, err
	}
	return mem[:n:n], nil
}

// span returns the n bytes at p, checking that they lie in one live block.
// The caller holds d.mu.
func (d *HostDevice) span(op string, p DevicePtr, n int64) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	id, off := uint64(p)>>hostShift, int64(uint64(p)&(1<<hostShift-1))
	mem := d.blocks.get(id)
	if mem == nil {
		return nil, d.err(op, n, fmt.Errorf("%w: %#x", ErrInvalidPointer, uintptr(p)))
	}
	if n > int64(len(mem))-off {
		return nil, d.err(op, n, fmt.Errorf("%w: %d bytes at offset %d of a %d-byte block", ErrSizeMismatch, n, off, len(mem)))
	}
	return mem[off : off+n], nil
}

func (d *HostDevice) err(op string, bytes int64, cause error) error {
	return &DeviceError{Op: op, Device: d.name, Bytes: bytes, Err: cause}
}

// blockTable maps a host block's id to its memory: a directory of fixed
// chunks, so that a block costs its slice header and nothing more (a map
// costs three times that per entry, and doubles as it grows). Ids are
// dense: handed out in order and reused, so chunks fill up.
type blockTable struct {
	chunks []*[blockChunk][]byte
}

const blockChunk = 1 << 10

// get returns block id's memory; nil if none.
func (t *blockTable) get(id uint64) []byte {
	if s := t.find(id); s != nil {
		return *s
	}
	return nil
}

// find returns block id's place in the table; nil if its chunk was never
// made, which it does not make.
func (t *blockTable) find(id uint64) *[]byte {
	c := id / blockChunk
	if c >= uint64(len(t.chunks)) {
		return nil
	}
	return &t.chunks[c][id%blockChunk]
}

// slot returns block id's place in the table, making its chunk if needed.
func (t *blockTable) slot(id uint64) *[]byte {
	c := id / blockChunk
	for c >= uint64(len(t.chunks)) {
		t.chunks = append(t.chunks, new([blockChunk][]byte))
	}
	return &t.chunks[c][id%blockChunk]
}
