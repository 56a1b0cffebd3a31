// Package pprofexport writes tensorlife's live tensors as pprof profiles, so
// the tools Go engineers already use to find a heap leak find a GPU memory
// leak too: go tool pprof -top, -list, -traces, -tagfocus, -diff_base, the
// flame graph of -http, and every continuous profiler that scrapes pprof
// endpoints (Parca, Grafana Pyroscope).
//
// It reads snapshots of a track.Tracker (track.Tracker.SnapshotOf) and never
// touches a device. Write a file from a test, a debug command or a signal
// handler,
//
//	snap, err := tracker.SnapshotOf(track.Filter{MinAge: 5 * time.Minute})
//	...
//	err = pprofexport.WriteFile("tensors.pb.gz", snap)
//
// and read it with
//
//	go tool pprof -top tensors.pb.gz
//	go tool pprof -list 'agent.step' tensors.pb.gz
//	go tool pprof -tagfocus request=r-42 -traces tensors.pb.gz
//
// or serve it over HTTP, mounted by you on a debug listener, next to
// net/http/pprof:
//
//	h, err := pprofexport.NewHandler(tracker)
//	...
//	debugMux.Handle("/debug/pprof/tensors", h)
//
//	go tool pprof -http=: http://localhost:6060/debug/pprof/tensors
//
// # What a profile holds
//
// The vocabulary is a Go heap profile's: sample types alloc_objects/count,
// alloc_space/bytes, inuse_objects/count and inuse_space/bytes, default
// inuse_space, period type space/bytes. Each group of live tensors that
// share call site, kind, device, dtype, shape and request labels
// (track.Group) is one sample with its inuse values and these labels:
//
//	dtype, device, kind, shape   the tensors' attributes ("bool", "cuda:0", "mask", "[64 64]")
//	request labels               from track.WithLabels ("request", "model", ...), as LabelKeys allows
//	bytes (numeric)              the size of each tensor, as in a Go heap profile
//	leaked                       "true" on tensors the garbage collector found without Free
//
// Tensors of a group that leaked and tensors that did not are two samples,
// so -tagfocus leaked=true selects exactly the leaked ones. A request label
// never takes the name of another: one named like the attributes above, or
// starting with "label_", is written as "label_" plus its name (LabelPrefix).
// Each call site also has one sample with its alloc values: the
// allocations made there since the tracker started. The tracker counts
// those per site only, so alloc samples carry no labels: -tagfocus selects
// live tensors, and with -sample_index=alloc_space it selects nothing.
//
// Stacks are symbolized when the profile is written, from the program
// counters recorded at each allocation: function names, files, lines and
// inlined calls, with a mapping marked symbolized, so go tool pprof needs
// neither the binary nor the build machine, only the sources for -list.
// The mapping names the executable by its file name (os.Executable's,
// "tensorlife" where that is unknown), which pprof's web UI shows as the
// profile's File, and, on Linux, the range its code was loaded at, so
// that where pprof does find a binary of that name (beside it, or under
// $PPROF_BINARY_PATH) its source view disassembles it at the right
// addresses.
// tensorlife's own frames (tensor.New, the pool, the tracker) are trimmed
// from the leaf end (KeepLibraryFrames keeps them), so the leaf of each
// stack is the line that asked for memory. Allocations whose stacks did not
// fit the tracker's stack table are shown under format.OverflowFunction, and
// frames that could not be symbolized under format.UnknownFunction: lost
// detail is visible, never dropped.
//
// Filters are the snapshot's (track.Filter): long-lived tensors only
// (MinAge, the leak suspects), one kind, tensors the garbage collector found
// leaked, request labels. DiffProfile and WriteDiff write what changed
// between two snapshots of one tracker (after minus before, what
// -diff_base shows); DeltaProfile is a window, every value of which is a
// difference over it: allocations made during it, and the change of the
// live set, negative where it shrank.
//
// # Gauges and deltas
//
// A plain profile (Profile, WriteFile, the handler without seconds) is a
// gauge: its in-use values are the live set when it was taken, and its
// alloc values count from the tracker's start. Read one at a time; two
// plain profiles are never added. A delta profile (DeltaProfile, the
// handler's ?seconds=N) is additive, like net/http/pprof's: every sample
// type, in-use ones included, is end minus start for the same stack and
// labels, so the deltas of consecutive windows add up to the change over
// all of them. That is how a continuous profiler reads a delta job: Parca
// stores every sample type of a delta profile as additive and adds them
// over the range it shows, which is then the growth of the live set over
// that range, per site and label. The live set itself is the plain job's.
//
// # Labels and who sees them
//
// Request labels often name requests, tenants or users. A file is written
// where its program puts it, so the writers keep every request label by
// default: -tagfocus request=r-42 works on a dump. A handler answers anyone
// who reaches it, so by default it serves no request label at all, only the
// tensors' own attributes, which name no request; list the keys it may
// serve with LabelKeys("model", "route"). tensorlife sets no request label
// of its own outside tests, so there is nothing of the library's to keep.
//
// # Options
//
// Options come in one type per family of functions, so that an option
// passed where it cannot apply does not compile:
//
//	ProfileOption  Profile, Write, WriteFile, WriteText: a profile of one snapshot
//	DiffOption     DiffProfile, WriteDiff, DeltaProfile: a profile of two snapshots
//	HandlerOption  NewHandler
//
// An option that applies to several families implements each of their
// types: KeepLibraryFrames and LabelKeys (FormatOption) apply everywhere;
// MinAge and Outlived (AgeOption) narrow a profile of one snapshot and
// set a handler's default filter. A diff or a delta takes no age option:
// it compares what its two snapshots selected, so take both with the
// filter. Filter, MaxConcurrentProfiles, MaxDeltaWindow and
// MaxConcurrentDeltas are the handler's. Values are checked where they are passed: a nil option or an
// invalid value is an error matching ErrInvalidOption that names the
// option.
//
// # The handler
//
// NewHandler answers GET requests with the profile of a fresh snapshot,
// gzip-compressed. Query parameters:
//
//	debug=1       a plain-text table instead: per site, live count and bytes, allocations, leaks,
//	              age of the oldest live tensor, the allocating line, then each site's stack
//	seconds=N     a delta profile over the next N seconds: every value is the change over the
//	              window (allocations made in it, the live set's growth, negative where it
//	              shrank); at most MaxDeltaWindow (5m by default), at most MaxConcurrentDeltas at
//	              once (4 by default)
//	min_age=5m    only tensors at least this old (a Go duration): the old-leak view, where a
//	              small slow leak is no longer hidden under in-flight activations
//	outlived=1    only tensors that outlived the request that made them (track.WithRequest):
//	              what the growth watcher judges
//	open=1        only tensors held in flight by open requests (track.Tracker.OpenRequests):
//	              what the requests running now hold, never judged
//	kind=mask     only tensors of this kind
//	device=cuda:1 only tensors on this device (a tracker over several devices)
//	leaked=true   only tensors the garbage collector found without Free
//	gc=1          run runtime.GC first, as net/http/pprof's heap?gc=1 does, at most once per
//	              GCInterval (10s): a gc=1 sooner than that after the last forced collection is
//	              served without forcing another
//
// As net/http/pprof, the handler ignores parameters it does not know
// (scrapers add their own), and moves the write deadline of a delta past
// its window, so the server's WriteTimeout need not exceed it. A parameter
// given twice with one value is that value (Parca and Grafana Alloy may send
// seconds twice); with different values it is refused. A malformed value, a
// debug other than 0 or 1, or a window beyond MaxDeltaWindow gets HTTP 400;
// a profile beyond MaxConcurrentProfiles (4 at once by default) or a delta
// beyond MaxConcurrentDeltas gets 429 Too Many Requests with Retry-After;
// each with a plain-text message that says the limit, which go tool pprof
// prints. A value quoted in such a message is cut to its first 64 bytes
// and its length, so an answer never grows with what a client sends. A
// delta's wait ends as soon as its request's context does (the client
// left, or the server shut down and cancelled it); meanwhile it holds the
// snapshot of the window's start, one group per sample a plain scrape
// would serve, never one entry per tensor. The handler registers nothing by
// itself and serves what any pprof endpoint serves: keep it on a debug
// listener, off public ones.
//
// # Continuous profiling
//
// Scrape the handler like any pprof endpoint. Without delta, each scrape is
// the live set at that moment, a gauge, which is what a leak hunt needs.
// With delta, each scrape is the change over its window, which the
// profiler adds up: Parca asks for ?seconds=<scrape_interval> and Grafana
// Alloy for the interval less one second, so consecutive windows tile the
// time, and intervals up to MaxDeltaWindow (5m by default) are served. Both scrapers' timeouts already allow for the window. The
// Parca and Grafana Alloy configurations, and what to watch for in them,
// are in docs/scrape.md in the repository:
// https://github.com/tensorlife/tensorlife/blob/main/docs/scrape.md
//
// # Cost
//
// A profile has one sample per group and per site, so writing it costs the
// same for ten thousand live tensors as for a million on the same sites
// (BenchmarkWriteProfile: a few milliseconds for a thousand sites). The
// handler's default profile, which shows no request label, is read from
// counters the tracker keeps as it records: a scrape costs the same at a
// million live tensors as at ten thousand on the same sites
// (BenchmarkScrapeCostIsFlatInLiveTensors). A profile that must look at
// each tensor (a query parameter, or request labels LabelKeys shows) walks
// the live set, bounded by MaxConcurrentProfiles; and groups tensors only
// by the labels it shows, so a request id per tensor costs it nothing.
// Write, WriteFile and the handler encode a profile as they read the
// snapshot, sample by sample, keeping none of the label values it writes,
// so a profile that does show a label per group allocates a small multiple
// of what it writes: under 2 MiB for the 853 KiB of a LabelKeys("request")
// profile of 200k request ids, where building the profile.Profile first
// took 647 MiB (TestLabelKeysProfileCostsWhatItWrites). WriteDiff and the
// handler's deltas add both snapshots up in a table of a few dozen bytes
// per sample and write what does not cancel out: 38 MiB for that diff,
// where merging two profiles took 1.1 GiB. The snapshots themselves are
// the tracker's, grouped by the labels shown, and cost their groups (about
// 230 bytes each while taken). The handler holds no Group of its profile:
// it reads them apart from their snapshot (track.Books.GroupsOf) and
// writes each as it reads it, so its whole answer costs the walk's entry
// of each group, its sort key and its table slot (about 110 bytes): 200k
// ids allocate about 23 MiB, 1M about 105 (where holding the Groups took
// 52 and 250), and 200k ids on tensors that also hold a label the profile
// does not show about 45 (BenchmarkLabelKeysProfile;
// BenchmarkLabelKeysGroupsApart measures both ways in alternating rounds).
// The text view (?debug=1) shows no label, and groups by none.
// Symbolizing happens once per site for the tracker's life. Every function
// here is safe for concurrent use.
package pprofexport
