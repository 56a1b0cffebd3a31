// Package tensor makes every device allocation an owned handle that knows
// where it came from.
//
// A Tensor is a dtype, a shape and a block of device memory drawn from an
// Allocator. New (or Make, or FromSlice) records the tensor in the
// allocator's track.Tracker with the caller's stack and the labels of the
// context; Free gives the handle's ownership up and, with the last owner
// (Retain adds owners), returns the memory and releases the record. Use
// after Free returns ErrFreed; a second Free returns a *DoubleFreeError that
// names the allocation site and the first free site.
//
// # Devices and allocators
//
// A Device is raw memory: Alloc, Free, MemInfo, copies and memset. Two
// exist: HostDevice, Go memory with a fixed capacity that behaves like a GPU
// of that size (tests, examples and CI use it), and the CUDA device in
// tensor/cuda (build tag cuda). An Allocator is what tensors are drawn
// from: DeviceAllocator goes straight to a Device; pool.Pool caches blocks
// and enforces a budget. The allocator also names the tracker its tensors
// are recorded in (see Allocator). Package tensor/foreign adopts memory
// allocated elsewhere.
//
// # Errors
//
// Every error matches one of the sentinels (ErrFreed, ErrOutOfMemory,
// ErrInvalidShape, ...) with errors.Is; *OOMError and *DeviceError carry the
// detail. An *OOMError's text names the call sites holding the most memory
// and the View, Retain or cache entry that keeps it. Bad input, by entry
// point:
//
//   - NewHostDevice: ErrInvalidSize for a capacity below 0; ErrInvalidOption
//     for a nil option or a bad value. NewDeviceAllocator: ErrNilAllocator
//     for a nil device; a device whose Name panics, a *DeviceError
//     matching ErrPanic.
//   - New, Make, FromSlice: ErrNilAllocator for a nil allocator;
//     ErrInvalidShape for a negative dimension or a shape whose bytes pass
//     MaxInt64; ErrInvalidDType for an unknown dtype; ErrOutOfMemory when
//     the allocator has no room; FromSlice: ErrSizeMismatch for a shape not
//     of the data. DeviceAllocator.Allocate: ErrInvalidSize for bytes not
//     above 0; Release: ErrForeignBlock for another allocator's block.
//   - CopyFromHost, CopyToHost and their At forms: ErrSizeMismatch for a
//     slice that does not fit. View: ErrInvalidShape for a bad shape,
//     ErrSizeMismatch for a window past the tensor.
//   - HandTo(nil) and a HandBack with nothing handed: track.ErrMisuse.
//   - Any operation on a freed handle: ErrFreed; a second Free: a
//     *DoubleFreeError matching ErrDoubleFree (a panic with the
//     tensorlife_invariants tag or the race detector).
//
// # Leaks the garbage collector finds
//
// Each handle carries a runtime finalizer. A handle that becomes
// unreachable without Free is reported by its tracker (track.OnLeak) at the
// line that made that handle, and its ownership is given up unless
// track.ReclaimLeaks(false) was set. This is a diagnosis for bugs, not a way
// to free: device memory is invisible to the garbage collector, which may
// not run for a long time.
//
// The finalizer sits on the handle itself: an inner object or a
// runtime.AddCleanup would cost 20 to 40 bytes more per live tensor, of a
// budget of 256. The price is a rule: never call
// runtime.SetFinalizer on a *Tensor (the runtime refuses a second one). An
// untracked tensor's handle and block are even one object with one
// finalizer, which gives the memory back once no handle of it is
// reachable, and carry no tracker record. A live tracked tensor costs
// about 236 B of host memory: its block and record (144 B), its handle
// (32 B) and the runtime's finalizer record; an untracked one about 170
// B: its handle and block (112 B) and the finalizer record
// (BenchmarkLiveTensorHostMemory).
//
// # Costs
//
// Through a warm pool, a tracked New+Free costs about 0.4× one
// runtime.Callers over the same frames (pool's
// BenchmarkTrackedNewFreeRatio); an untracked one 1.38–1.49× the
// cheapest GC-watched handle, a 64 B allocation with runtime.AddCleanup
// and Stop, of which the pool's hit is 0.16× and the handle's allocation
// and finalizer about 1.0× (BenchmarkUntrackedNewFreeRatio). The rest is a
// hash and one cache line for the metadata (a hint keyed by the identity
// of the kind and device strings), the byte count, and the device name
// read from the allocator's mark.
package tensor
