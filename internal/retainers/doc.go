// Package retainers answers, inside a failing test, what still holds a
// leaked tensor: given the addresses of target objects (the leaked tensors'
// handles), it writes a heap dump of the process, finds the shortest chain
// of references from a root to each target, and names every step of it:
//
//	package var main.maskCache["prompt-17"]   (map[string]*tensor.Tensor)
//	package var main.registry.sessions[3].masks[0]   (*main.Registry)
//	package var main.hooks[0] → closure main.init.func1, captured m   ([]func())
//	goroutine 18 [chan receive], created by main.serve at server.go:31: frame main.worker (worker.go:40), local t   (*tensor.Tensor)
//
// Track/tracktest is its one user (the Retainers option,
// TENSORLIFE_RETAINERS=1); the hooks that let package tensor and
// tensor/cuda take part live in internal/heapfence, so that production
// binaries link none of this.
//
// # How
//
// runtime/debug.WriteHeapDump writes the documented records of
// runtime/heapdump.go to a temporary file: every heap object with its
// contents and pointer offsets, the data and bss segments with their
// pointer masks, every goroutine with its frames (function, pc, contents,
// pointer offsets), finalizers, deferred calls and panics. The search is
// breadth-first from all roots at once, so the first path to reach a target
// is a shortest one; ties go to package variables, then user goroutines,
// then finalizers and the rest, then the runtime's own goroutines. Within
// a goroutine, its own code's frames come before those of the packages it
// blocks in (the runtime, sync, time): a goroutine parked in select, on a
// channel or on a mutex is named by the first frame of its code and that
// frame's local, never by runtime.selectgo's, whose cases point into the
// caller's frame; a word of the caller's frame that only the runtime's
// frames point at is named by the caller's frame too, and a frame parked
// in an inlined call (sync.Mutex.Lock's fast path) is at its own line,
// from the DWARF's call line. A method value (x.M stored as a func) is
// followed into its receiver: "→ method value (*T).M, receiver w.items[1]".
// Nothing
// else of the runtime is read: no runtime internals, no debugger, no cgo.
// The dump is named tensorlife-heapdump-<pid>-<digits> in the temporary
// directory and removed once read; a process killed meanwhile leaves it,
// and the next search removes the dumps of that naming an hour old or
// older, nothing else.
//
// Names come from the running executable:
//
//   - package variables from the ELF symbol table (.data, .bss,
//     .noptrdata, .noptrbss) and the DWARF; a position-independent binary
//     is read at the offset between a known function's run-time address
//     and its link-time one;
//   - types, struct fields, slice and array indices, map keys (Go 1.26's
//     swiss maps: the linker's map<K,V>, table<K,V> and group types),
//     channel buffers, sync.Map entries, interfaces' dynamic types
//     (DW_AT_go_runtime_type maps a type word back to its DWARF type),
//     closure variables (DW_AT_go_closure_offset) and frame locals (the
//     location lists at the frame's pc, inlined calls included) from the
//     DWARF;
//   - goroutines, frames and closures' functions from the process's own
//     function table (runtime.FuncForPC), which every binary has.
//
// # Without symbols
//
// `go test` and `go run` link with -s -w: no symbol table and no DWARF.
// Then a path still says which goroutine and frame (with file and line),
// which closure's function, and which segment holds the root, with the
// sizes of the objects between and the offsets of the pointers; the note
// says what is missing and the flag to rerun with, RerunHint:
// go test -ldflags='-s=false -w=false'. A binary from `go test -c` or `go
// build` has both.
//
// # Bounds
//
// At most Config.MaxPaths paths are named (32 by default), each of at most
// Config.MaxDepth heap objects (64). The dump is not written when the heap
// would make it larger than Config.MaxDumpBytes (1 GiB; estimated as 1.4
// times the in-use heap spans and stacks), and not read when it comes out
// larger. Reading the dump and the binary, the search and the naming stop
// at Config.Timeout (10 s) with what they have; the dump itself cannot be
// interrupted. The dump holds the whole heap on disk and in memory (about
// 1.3 times the live heap), briefly. BenchmarkFind measures a test-sized
// heap (200,000 objects, a 9.5 MiB dump; Go 1.26.8 on 2 shared CPUs): 27
// to 66 ms with the world stopped, 0.09 to 0.16 s in all in a stripped
// binary, 0.17 to 0.25 s when the symbols and the DWARF are read.
//
// # What it cannot see
//
// The dump omits runtime.AddCleanup closures and arguments and the data of
// other modules (plugins): a target kept only there has no path. A target
// must stay pinned while the dump is written, so that its slot is not
// reused: Find's targets slice does that. The calling goroutine's own
// frames (this package's, the runtime's and Config.Own's) are not roots, and
// the targets slice is never a step.
//
// # The hazard: a dump can crash the process
//
// On Go 1.26 (reproduced on go1.26.8) WriteHeapDump throws "dumpgs in STW -
// bad status" and kills the process when a goroutine is leaving a system
// call or a cgo call while the dump runs: the goroutine is already marked
// running when the dump walks the goroutines (reproduced after 15 to 71
// dumps with goroutines looping on syscall.Read, after 32 with a cgo loop;
// go1.25.0 ran 3,000 dumps without it). The same throw follows with
// GOEXPERIMENT=goroutineleakprofile once goroutines are marked leaked. A
// throw is not a panic: nothing recovers it.
//
// Find makes this as unlikely as a library can:
//
//   - it runs in test binaries only (testing.Testing), never in a
//     production handler: it returns ErrNotTest elsewhere;
//   - it holds tensorlife's own device calls (the cgo calls of tensor/cuda)
//     off for the dump: heapfence.HoldDevices waits for those in flight and
//     keeps new ones waiting off the CPU;
//   - before dumping it samples every goroutine a few times, and waits up
//     to Config.MaxWait (250 ms) while any is seen in a system call or a cgo
//     call, in their code, or marked leaked; if some still are, it does not
//     dump and returns a *BusyError naming them. A goroutine looping on short
//     calls and one blocked in a long call look alike (under CPU contention
//     the loop's thread waits in the kernel too), and either may return while
//     the dump runs, so both keep it from being written: a test that waits
//     on a child process or a blocking read beside the check gets no
//     retainers, and the report says why. os/signal's goroutine, which leaves
//     its wait only when a signal arrives, is let be. A goroutine that enters
//     a system call after the last sample and is still in it when the world
//     stops is the one case no library can rule out.
//
// The tests run the busy case in a child process, so that a crash, should
// the guard ever miss, fails a test rather than taking the test binary
// down.
package retainers
