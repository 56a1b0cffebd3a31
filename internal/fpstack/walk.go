package fpstack

import (
	"runtime"
	"runtime/debug"
	"unsafe"
)

// Guards of the walk. Each bounds what a corrupt frame-pointer chain can make
// the walk read; none of them is ever reached by a healthy Go stack.
const (
	// MaxFrameBytes bounds the distance from one frame record to the next.
	// A Go frame larger than 1 MiB does not exist in practice (the compiler
	// moves such locals to the heap); a larger step means the chain left the
	// goroutine stack, for example into a C or system stack.
	MaxFrameBytes = 1 << 20

	// MaxFrames bounds the frame records one walk visits, skipped ones
	// included, whatever the buffer length and skip.
	MaxFrames = 1024
)

const ptrSize = unsafe.Sizeof(uintptr(0))

// Walk writes into buf the return program counters of the calling goroutine's
// physical frames, read by following the frame-pointer chain, and returns
// how many it wrote. It allocates nothing and takes no lock.
//
// skip is the number of frames to skip before recording, with 0 identifying
// the frame of the function calling Walk: Walk(s, buf) and
// runtime.Callers(s+1, buf) called from the same function start at the same
// frame. Walk counts physical frames where runtime.Callers counts logical
// ones, so every function that skip passes over must not be inlined
// (//go:noinline) and must not have inlined the call that led to Walk.
//
// ok is false when Walk could not be trusted and the caller must fall back
// to runtime.Callers: frame-pointer capture is disabled (SetEnabled,
// TENSORLIFE_STACK=callers) or unsupported on this architecture, a guard
// refused the chain (a frame pointer not strictly above the previous one,
// misaligned or more than MaxFrameBytes above it, a zero return address,
// more than MaxFrames records), or reading the chain faulted. A fault is recovered, never a crash; refusals and faults are
// counted in Stats. When the stack is deeper than buf, Walk fills buf and
// returns ok, as runtime.Callers truncates.
//
// An ok walk is plausible, not proven: a corrupt chain that passes the
// guards yields program counters that symbolize to nothing or to the wrong
// frames. Callers that cache by the walk's PCs check them once with Covers.
//
// Walk reads only the calling goroutine's own stack: it is safe for
// concurrent use.
//
//go:noinline
func Walk(skip int, buf []uintptr) (n int, ok bool) {
	if !supported || !Enabled() || skip < 0 {
		return 0, false
	}
	// walkFrom reads its own frame record first, whose return address is in
	// Walk; Walk's own record holds the return address into its caller.
	return walkFrom(0, skip+1, buf)
}

// Capture writes the caller's stack into buf like Walk and falls back to
// runtime.Callers when Walk refuses. skip means what it means in Walk.
//
// walked reports which capture filled buf: frame-pointer PCs of physical
// frames (true) or runtime.Callers PCs of logical frames (false). Both
// symbolize with runtime.CallersFrames; they differ as the package
// documentation says, so a cache keyed by PCs keeps the two apart.
//
//go:noinline
func Capture(skip int, buf []uintptr) (n int, walked bool) {
	if skip < 0 {
		skip = 0
	}
	if n, ok := Walk(skip+1, buf); ok {
		return n, true
	}
	stats.fallbacks.Add(1)
	// 0 is runtime.Callers, 1 is Capture, 2 the function calling Capture.
	return runtime.Callers(skip+2, buf), false
}

// Callers is runtime.Callers with Walk's meaning of skip: Walk(s, a) and
// Callers(s, b) called from the same function start at the same frame, so
// their results can be compared with Agree. It counts nothing.
//
//go:noinline
func Callers(skip int, buf []uintptr) int {
	if skip < 0 {
		skip = 0
	}
	// 0 is runtime.Callers, 1 is Callers, 2 the function calling Callers.
	return runtime.Callers(skip+2, buf)
}

// walkFrom walks the chain from the frame record at fp, or from its own
// frame when fp is 0, with faults turned into a recovered panic.
//
// The frame pointer is read here, after every call that could grow (and so
// move) the stack, and the walk itself makes no call: a uintptr into the
// stack is not adjusted when the stack moves, so reading it across a call
// that grows the stack would walk a stale copy.
//
//go:noinline
func walkFrom(fp uintptr, skip int, buf []uintptr) (n int, ok bool) {
	stats.walks.add(uintptr(unsafe.Pointer(&buf)))
	// SetPanicOnFault makes a fault on a mapped-but-forbidden or unmapped
	// address panic in this goroutine instead of killing the process; it is
	// per goroutine, so the previous setting is restored before returning.
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if recover() != nil {
			stats.faults.Add(1)
			n, ok = 0, false
		}
	}()
	if fp == 0 {
		fp = getfp()
	}
	n, ok = walkChain(fp, skip, buf)
	if !ok {
		stats.refused.Add(1)
	}
	return n, ok
}

// walkChain follows the frame records from fp, as the runtime's
// fpTracebackPCs does (runtime/tracestack.go), with guards. A frame record
// is two words: the caller's frame pointer at fp and this frame's return
// address at fp+ptrSize, on amd64 and arm64 alike.
//
// nosplit, norace and nocheckptr: the loop must not grow the stack (see
// walkFrom), and its loads are of raw stack words that the race detector
// and the pointer checks do not model.
//
//go:noinline
//go:nosplit
//go:norace
//go:nocheckptr
func walkChain(fp uintptr, skip int, buf []uintptr) (n int, ok bool) {
	if fp == 0 || fp%ptrSize != 0 {
		return 0, false
	}
	for visited := 0; n < len(buf); visited++ {
		if visited == MaxFrames {
			return n, false
		}
		pc := *(*uintptr)(unsafe.Add(nil, fp+ptrSize))
		next := *(*uintptr)(unsafe.Add(nil, fp))
		if pc == 0 {
			return n, false // a frame record without a return address
		}
		if skip > 0 {
			skip--
		} else {
			buf[n] = pc
			n++
		}
		if next == 0 {
			return n, true // the outermost frame (runtime.goexit's callee)
		}
		if next <= fp || next-fp > MaxFrameBytes || next%ptrSize != 0 {
			return n, false
		}
		fp = next
	}
	return n, true
}
