// Package pool is tensorlife's caching device allocator: a *Pool implements
// tensor.Allocator over any tensor.Device, keeps released blocks and hands
// them out again instead of asking the device (a device allocation costs
// tens of microseconds and synchronizes the device), holds no more than its
// budget, and when memory runs out returns an error that names the lines of
// code holding it.
//
//	host, _ := tensor.NewHostDevice(4 << 30)
//	p, err := pool.New(host, pool.BudgetFraction(0.9), pool.MaxCachedBytes(1<<30))
//	...
//	t, err := tensor.New(ctx, p, tensor.Float32, 8, 4096) // recorded in track.Default()
//	defer t.Free()
//
// # Size classes
//
// Every request is rounded up to a size class, and released blocks are kept
// on one free list per class:
//
//	request             class step               classes   waste per block
//	1 B – 64 KiB        512 B                    128       < 512 B
//	64 KiB – 1 MiB      1/8 of the power of two  32        < 1/9 (11.1%)
//	                    (8 KiB … 64 KiB)
//	1 MiB – 64 GiB      1/4 of the power of two  64        < 1/5 (20%)
//	                    (256 KiB … 8 GiB)
//	over 64 GiB         no class: rounded up to  —         < 2 MiB
//	                    2 MiB, never cached
//
// Waste is the part of the block the request does not use, as a share of
// the block: the bytes the pool holds beyond what was asked for.
//
// Small tensors (masks, logits, per-request scratch) come in many sizes and
// round tightly; large ones (KV caches, activations) come in few sizes that
// recur, and coarser steps let a block freed by one request serve the next
// request's slightly different length, as PyTorch's power-of-two divisions
// do. Blocks are never split or merged, so a block serves only its class.
// Requests above 64 GiB are rare enough that caching them would only pin
// memory; they go to the device and back each time.
//
// # Cache bound and budget
//
// Reserved bytes are what the pool holds from the device: Active (handed
// out) plus Cached (idle, kept for reuse). MaxCachedBytes caps Cached: a
// block released when the cache is full goes back to the device (an
// eviction). Budget and BudgetFraction cap Reserved, and the cap is checked,
// by reserving the bytes atomically, before the device is asked, so no
// allocation ever takes the pool past its budget, whatever the concurrency.
//
// When the budget or the device refuses a new block, the pool returns every
// cached block to the device and tries once more; only if that fails does
// Allocate return a *tensor.OOMError (matching tensor.ErrOutOfMemory). The
// cache is kept, and the error returned at once, when emptying it cannot
// help: the request is larger than the device, or the budget would refuse
// it with nothing cached (active bytes plus the request exceed it). Its
// Error text holds the request, the limit that refused it ("budget" or
// "device"), the pool's reserved, active and cached bytes, the device's free
// bytes, and the call sites of the tracker with the most live bytes, each
// with function, file:line, tensor count and bytes: what an operator needs
// to see where the memory went. The sites come from the tracker's per-site
// counters, which cost nothing to keep and little to read. OnOutOfMemory
// hands every such error to a function before Allocate returns it, for a
// dump of the moment (package oomdump writes one).
//
// # Admission
//
// A service can admit a request before it starts instead of running out
// of memory at its 900th token. One that knows each request's size before
// it starts (its prompt and the tokens it may generate) states it:
//
//	units := int64((prompt + maxTokens) * batch)
//	ctx, adm, err := p.AdmitSized(r.Context(), tr.KindOf(track.LabelsFrom(ctx)), units, worstCase)
//	if errors.Is(err, pool.ErrAdmissionRefused) { // 503, Retry-After: nothing was allocated
//	...
//	defer adm.End()
//
// Each kind learns, from its admitted requests that ended on the pool, the
// line base + perUnit × units above their peaks (in the pool's rounded
// bytes), and reserves it for the request's own size; without that history
// (fewer than AdmitHistory such requests, or a size larger than any of
// theirs) it reserves the fallback the caller states for this request
// (Admission.Fallback says so). A kind whose admitted request ran out of
// memory or went past its reservation raises its reservations at once and
// lowers them slowly, as Kubernetes' vertical pod autoscaler does. Admit,
// without a size, reserves the kind's p99 peak (the pool's once there are
// AdmitHistory admitted requests of the kind, the tracker's before that,
// else the fallback).
//
// The budget gates one figure, the bytes held from the device plus the
// reservations not yet drawn, so a burst of admissions sees the ones
// admitted before it and an allocation outside any admission cannot take
// what was promised. The pool is a tensor.ContextAllocator: a tensor made
// under the context Admit returns draws its block from the reservation
// first and from the free budget past it, and a block it frees while the
// request is open goes back to the reservation (a KV cache that grows by
// reallocating keeps its share; a freed block stays cached beside it only
// if the budget holds both). The reservation is released by End, at once
// for every reader, or when the context is done: the request's end, never
// a clock (see Admit for when each reader sees a context's end). A refusal
// is an *AdmissionError (kind, size, reservation, headroom) matching
// ErrAdmissionRefused. Stats counts admissions and refusals by kind
// (Stats.AdmissionKinds, bounded as the tracker's kinds are) with what each
// kind learned.
//
// Admission costs a map lookup in a bounded table of kinds, a few atomic
// operations and two short locks, whatever the open requests (Admit+End at
// 10k open requests 1.03× its cost at 100, BenchmarkAdmitOpenRequestsRatio);
// a refusal reads the budget's figures alone (at 10k open 1.01× its cost at
// 100, BenchmarkAdmitRefusedOpenRequestsRatio), and returns the cache to
// the device first when that makes room. Allocations outside any admission
// pay one atomic load while admissions are open, those under one a context
// lookup, a channel check and a few atomics (about 6% on a tracked
// New+Free under a request, BenchmarkAdmittedNewFreeRatio).
//
// # Blocks and release checks
//
// A Block's Tag carries the pool's identity (drawn from the counter tensor.DeviceAllocator uses too) in its
// high 32 bits and, in its low 32, the index of the pool's descriptor for
// the block and a generation that advances each time the block is
// released. Release refuses:
//
//   - a block from another allocator (tensor.ErrForeignBlock), by one
//     compare;
//   - a block whose pointer or size does not match the descriptor, or whose
//     descriptor holds no device block any more: forged, corrupted, or a
//     stale copy of a block returned to the device (tensor.ErrInvalidPointer);
//   - a block that is not handed out: a double release
//     (tensor.ErrInvalidPointer);
//   - a stale copy of a block that has been handed out again since: its
//     generation is behind (tensor.ErrInvalidPointer).
//
// A descriptor belongs to one size class for life and is guarded by that
// class's lock, which Release takes anyway, so the checks cost a lookup
// (two loads) and a few compares: no map, no global lock, no extra atomic
// operation. What is not caught: a stale copy of a block that was released
// a multiple of 256 times since the copy was made (the tag keeps 8 bits of
// the generation), and a block forged with the exact tag, pointer and size
// that its current holder has. Refused releases are counted
// (Stats.BadReleases); with the tensorlife_invariants build tag they panic.
// Tensors reach Release only through their last Free, so code that uses
// tensor handles never double-releases.
//
// # Closing
//
// Close returns the cache to the device. Blocks still handed out stay
// allocated (tensors may still use them) and Close reports them in an
// *ActiveBlocksError (matching ErrActiveBlocks) that lists the live sites
// holding them; when those tensors are freed later, their blocks go straight
// back to the device. After Close, Allocate returns tensor.ErrClosed.
//
// # Concurrency and cost
//
// A Pool is safe for concurrent use. Its free lists are sharded, as Go's
// allocator keeps a cache per P: once goroutines are seen to contend, each
// allocates from its P's shard, found by the hint its P gave it, which the
// goroutine keeps in a slot named by its stack (a hit of a spread pool
// costs 1.05–1.2× one before it spread). An allocation the cache serves
// takes one lock of its class in that shard (held for a slice pop and a
// few field reads) and one atomic add to that shard's active bytes; a
// release takes the lock of the block's shard (the checks above and a
// slice push) and one atomic add. Goroutines on different cores share no
// lock and write no shared cache line on this path, whatever the size
// class, and a shard short of a block takes one that a sibling caches
// before it asks the device. The budget is one reservation on the miss
// path, exact however the blocks are spread; only MaxCachedBytes, a
// pool-wide cap, adds one shared atomic per hit and release. PeakActive is
// sampled, at every device allocation and every Stats call, not at every
// hit: a peak reached only by cache hits between two samples is not seen.
// The pool-wide lock is taken only when a miss needs a new descriptor. The
// hit path allocates no Go memory and costs 0.155–0.17× the cheapest
// GC-watched handle (BenchmarkPoolHitRatio). Stats reads atomics and each class's
// lock in each shard in turn.
package pool
