// Package gorgoniatrack makes the memory of gorgonia.org/tensor's Dense
// tensors tensorlife tensors: budgeted by a pool, tracked at the line that
// made them, part of their request, found when dropped without Free.
//
// An Engine is a gorgonia Engine over a tensorlife allocator, normally a
// *pool.Pool over a tensor.HostDevice. The one line to add is the engine,
// passed where gorgonia takes one (gorgonia is gorgonia.org/tensor here):
//
//	eng, err := gorgoniatrack.NewEngine(pool)
//	...
//	d := gorgonia.New(gorgonia.WithShape(2, 3), gorgonia.Of(gorgonia.Float32), gorgonia.WithEngine(eng))
//	defer gorgoniatrack.Free(d)
//
// Every Dense made WithEngine(eng), and every result gorgonia makes from one
// with Clone (Add, Mul, MatMul...), is then a tracked tensor of kind Kind:
// in the live set, the profiles, the growth watcher's windows and
// tracktest's checks, at the line that called gorgonia. Engine.Free (or
// Free) gives it back. gorgonia itself never frees through its engine, so
// a Dense that is not freed stays live: tracktest and the watcher see it.
// The results gorgonia makes on its own StdEng instead (reductions: Sum,
// Max, Argmax) are ordinary Go memory, which neither the engine nor the
// budget sees and the collector frees.
//
// # Sites
//
// NewEngine marks gorgonia's packages and this one as library code
// (track.AdapterPackages), so every Dense, made by New or by gorgonia
// (WithEngine, an operation's result), is named at the line that called
// it, on any tracker and whatever helpers the tracker was made with.
//
// # Dropped Denses: what WithEngine alone cannot see
//
// gorgonia keeps only the address of what Alloc returns, in a slice no
// tensorlife object is reachable from, so an engine alone cannot tell a
// Dense dropped from one kept: a Dense made WithEngine and dropped without
// Free stays live in the tracker for good (outlived once its request
// ends) at its line, which tracktest and the watcher report as still live,
// never as dropped.
//
// New and FromSlice (and Watch, for a Dense gorgonia made) watch the Dense
// itself: its engine is one of its own that holds the tensor's handle, and
// the engine's table holds the handle only weakly. A Dense dropped without
// Free drops its handle with it, which package tensor reports as for its
// own handles: track.OnLeak at the line that made it, tracktest's "dropped
// without Free", and, unless track.ReclaimLeaks(false), the memory back to
// the pool. A view (Slice) and an operation's result share their Dense's
// engine, so they keep its memory, and its report waits until they go too:
// a view never reads memory handed out again.
//
// A Dense kept past its request on purpose (a cache) is handed to a
// track.Owner with HandTo, as a tensor is with tensor.Tensor.HandTo: the
// watcher then judges the owner by its bound, not the Dense by its request.
//
// # Out of memory
//
// New and FromSlice allocate before gorgonia runs, and return the
// allocator's *tensor.OOMError (matching tensor.ErrOutOfMemory; its text
// names the lines holding the memory) and no Dense when the budget is
// spent. gorgonia's own constructors and operations panic when Alloc fails
// (Dense.makeArray in gorgonia.org/tensor v0.9.24), with that same error
// as the panic's value: recover it and errors.As it, or allocate with New.
//
// # Requests
//
// gorgonia passes no context to its engine. A request reaches it through
// the engine: eng.For(ctx) is an engine bound to ctx, whose allocations
// carry ctx's labels and belong to ctx's request (outlived when it ends
// while still live, admitted against a pool.Admit reservation); New(ctx,
// ...) binds its Dense's engine to ctx, so that gorgonia's results from
// that Dense are the request's too. NewEngine's engine allocates under
// context.Background(), under no request.
//
// # Host memory only
//
// A Dense reads and writes its memory in place, on the host. NewEngine
// therefore takes only an allocator whose device is tensor.HostMemory (the
// host device is): an allocator on a GPU is refused with an error matching
// ErrNotHostMemory, since a Dense over it would dereference device
// addresses. Keep GPU tensors in package tensor, and copy to a Dense.
//
// Memory from an Engine is zeroed, as gorgonia's own is. A dtype that holds
// Go pointers (string, interface types) must not live in it, where the
// collector does not look: New and FromSlice refuse one with an error
// matching tensor.ErrInvalidDType; gorgonia's constructors do not ask.
//
// An Engine is safe for concurrent use; a Dense is not. Free a Dense before
// gorgonia.ReturnTensor recycles it, and never use it after Free: its memory
// may be another tensor's by then.
package gorgoniatrack
