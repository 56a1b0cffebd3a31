// Package foreign makes owned tensors of device memory that tensorlife did
// not allocate: an output buffer a cgo library handed back, a workspace a
// math library made. A service that only makes tensors with tensor.New
// never needs it; code that receives memory from elsewhere does.
//
// Adopt wraps the memory (its device, its first byte, its size, and the
// function that gives it back) into a *tensor.Tensor, recorded in the
// tracker at Adopt's caller with the context's labels, as kind Kind
// ("adopted") or the Spec's. From then on it is a tensor like any other:
// Free, Retain, View, HandTo, leak reports, profiles and tracktest treat it
// alike, and its bytes count as tensorlife's on its device
// (Tracker.ReservedOn, the summary, a pool's OOM error), not as
// memory outside tensorlife. The release function runs exactly once, when
// the last owner frees or the garbage collector reclaims a dropped handle:
//
//	t, err := foreign.Adopt(ctx, tr, foreign.Memory{Device: dev, Ptr: p, Bytes: n,
//		Release: func(p tensor.DevicePtr) error { return lib.Free(p) }},
//		tensor.Spec{DType: tensor.Float32, Shape: tensor.Shape{n / 4}})
//
// Adopt refuses memory it cannot own safely: a size above the device's
// total memory, and memory that another live adoption on the same device
// holds (ErrAlreadyAdopted), whatever the tracker. That check needs the
// device's record of its adoptions, LiveAdoptions, which a Device
// implementation embeds; tensor.HostDevice and the CUDA device have one.
//
// # Errors for bad input
//
// Adopt, the one entry point, refuses (and leaves the memory the caller's,
// its Release uncalled): a nil Memory.Device or Release with an error
// matching tensor.ErrNilAllocator; a zero Ptr, tensor.ErrInvalidPointer;
// Bytes not above 0, above the device's total memory or above what its
// other live adoptions leave, tensor.ErrInvalidSize; memory overlapping a
// live adoption on the device, ErrAlreadyAdopted; a bad shape,
// tensor.ErrInvalidShape; a shape that needs no bytes or more than Bytes,
// tensor.ErrSizeMismatch; a device whose Name or MemInfo panics, a
// *tensor.DeviceError matching tensor.ErrPanic; a tracker that keeps no
// room for the adoption books, track.ErrTooManyLocals. A Release that
// panics is a *PanicError matching ErrPanic.
//
// # The release queue
//
// A release function is foreign code and is run as such. A panic in it is
// recovered into a *PanicError (matching ErrPanic). After Free it runs on
// the goroutine that called Free, which gets its error. After a dropped
// handle it never runs on the runtime's finalizer goroutine: a blocking or
// panicking release there would stall or kill every finalizer in the
// process, every leak report among them. The finalizer only queues it on
// package tensor's release queue, the one every allocator's dropped memory
// goes through (tensor.DroppedReleaser, tensor.WaitReleases): releaser
// goroutines that run only while the queue holds work, at most four at
// once, so up to three release functions that never return delay nothing
// but themselves. The errors of dropped releases, which nobody can be
// handed, are counted per tracker and device in Adoptions.
//
// The package keeps no process-wide state: a tracker's figures live in
// the tracker and a device's live adoptions in the device.
package foreign
