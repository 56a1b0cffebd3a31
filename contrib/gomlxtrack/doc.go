// Package gomlxtrack tracks the device memory of GoMLX programs in a
// tensorlife tracker: every buffer a GoMLX backend makes becomes a tracked
// tensor of its real size at the line that asked for it, so that
// tensorlife's profiles, growth watcher, test assertions, request costs and
// admission see GoMLX's memory as they see their own.
//
// # One line in a program
//
//	tr := track.Default()
//	if err := gomlxtrack.Install(tr); err != nil { ... }
//	backend := backends.MustNew() // or backends.NewWithConfig("go"): tracked
//
// Install re-registers GoMLX's backends (backends.Register) so that
// backends.New and backends.NewWithConfig return them wrapped (Wrap); a
// program, or a library such as hugot that makes its own backend, changes
// nothing else. Wrap wraps one backend value instead.
//
// A wrapped backend books each buffer it makes (from flat data, shared
// buffers, copies to another device, a program's outputs) as a record of
// kind KindBuffer on device "<backend>:<n>" ("go:0"), with GoMLX's dtype
// and shape, and releases it on BufferFinalize, which tensors.Tensor's
// FinalizeAll calls. An input donated to a program is released once, when
// the program takes it; the memory the backend reuses for an output is
// booked as that output. A site names the first frame outside GoMLX and
// this package (track.AdapterPackages), on the goroutine that called into
// GoMLX, whichever goroutines the backend computes on; it costs one
// frame-pointer walk a buffer.
//
// # Requests: Exec
//
// GoMLX passes no context to its backend, so a buffer made inside
// (*graph.Exec).Exec belongs to no request. Exec runs a graph.Exec under a
// context instead: its outputs, and the device copies of the local tensors
// it was given, are booked at the line that called Exec, under ctx's labels
// and request (track.WithRequest, track/httptrack): in flight while the
// request is open, outlived if still live when it ends (what the growth
// watcher judges and the ?outlived=1 profile shows), counted in its kind's
// peaks, which pool admission reserves.
//
// # Dropped tensors
//
// GoMLX v0.26.0's tensors have no finalizer: a tensor dropped without
// FinalizeAll holds its device memory until the backend is finalized. The
// adapter watches what GoMLX holds of each buffer (runtime.AddCleanup): once
// the collector finds it unreachable unfinalized, the tracker reports the
// buffer dropped at its line (track.OnLeak, tracktest) and, when it
// reclaims leaks (track.ReclaimLeaks, the default), the adapter finalizes
// it in the backend, from the runtime's cleanup goroutine, under recover.
// Finalize of a wrapped backend releases every record it still holds.
//
// # Compiled programs: what it can and cannot see
//
// Each compiled program is booked as a record of kind KindProgram at the
// line whose call compiled it, handed to the backend's owner "gomlx
// programs (<backend>)" (track.Owner), and released by its Finalize
// ((*graph.Exec).Finalize). No backend of GoMLX v0.26.0 says what a
// program holds: its pure-Go backend ("go") keeps the program's constants,
// its nodes and a pool of execution buffers, its XLA backend does not pass
// on the memory statistics of go-xla. The adapter books what the builder
// shows it, the bytes of the constants (a model's weights compiled in), a
// lower bound; so the owner has no byte bound, and a graph.Exec whose cache
// grows with input shapes (a new program for each new shape) is judged by
// growth at the line that compiles, by the watcher as any site. A program
// without constants is booked at 0 bytes: counted (track.Tracker.Owners),
// never judged. The intermediate buffers the pure-Go backend draws from its
// own pool while a program runs never leave it through the backend's
// interface, and are not seen.
//
// # Other backends
//
// This package links GoMLX's pure-Go backend alone, whose constructor
// Install knows. A program that links XLA tells Install its constructor
// first (Know("xla", xla.New)); a registered backend Install does not know
// is left as it is, and Install says so (ErrUnknownBackend). A buffer a
// wrapped backend did not make (one of another backend, or of the backend
// it wraps) is an error matching ErrForeignBuffer, never a panic.
//
// Wrapped backends, Exec and Wrap are safe for concurrent use as GoMLX's
// own are; Install and Know, like backends.Register, are not.
package gomlxtrack
