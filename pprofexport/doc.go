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
// or serve it over HTTP, mounted by you, next to net/http/pprof:
//
//	mux.Handle("/debug/pprof/tensors", pprofexport.Handler(tracker))
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
//	request labels               from track.WithLabels ("request", "model", ...)
//	bytes (numeric)              the size of each tensor, as in a Go heap profile
//	leaked (numeric)             tensors the garbage collector found without Free
//
// A request label named like one of these is written as "label_" plus its
// name. Each call site also has one sample with its alloc values: the
// allocations made there since the tracker started. The tracker counts
// those per site only, so alloc samples carry no labels: -tagfocus selects
// live tensors, and with -sample_index=alloc_space it selects nothing.
//
// Stacks are symbolized when the profile is written, from the program
// counters recorded at each allocation: function names, files, lines and
// inlined calls, with a mapping marked symbolized, so go tool pprof needs
// neither the binary nor the build machine, only the sources for -list.
// tensorlife's own frames (tensor.New, the pool, the tracker) are trimmed
// from the leaf end (KeepLibraryFrames keeps them), so the leaf of each
// stack is the line that asked for memory. Allocations whose stacks did not
// fit the tracker's stack table are shown under track.OverflowFunction, and
// frames that could not be symbolized under track.UnknownFunction: lost
// detail is visible, never dropped.
//
// Filters are the snapshot's (track.Filter): long-lived tensors only
// (MinAge, the leak suspects), one kind, tensors the garbage collector found
// leaked, request labels. DiffProfile and WriteDiff write what changed
// between two snapshots (new minus old, what -diff_base shows);
// DeltaProfile is a window: allocations during it, tensors live at its end.
//
// # The handler
//
// Handler and NewHandler answer GET requests with the profile of a fresh
// snapshot, gzip-compressed. Query parameters:
//
//	debug=1       a plain-text table instead: per site, live count and bytes, allocations, leaks,
//	              age of the oldest live tensor, the allocating line, then each site's stack
//	seconds=N     a delta profile over the next N seconds: alloc values over the window, in-use at
//	              its end; refused when N reaches the server's WriteTimeout; ends with the request
//	min_age=5m    only tensors at least this old (a Go duration)
//	kind=mask     only tensors of this kind
//	leaked=true   only tensors the garbage collector found without Free
//	gc=1          run runtime.GC first, as net/http/pprof's heap?gc=1 does
//
// A malformed value, an unknown parameter or a repeated one gets HTTP 400
// with a plain-text message, which go tool pprof prints. The handler
// registers nothing by itself and serves what any pprof endpoint serves:
// keep it off public listeners.
//
// # Continuous profiling
//
// Scrape the handler like any pprof endpoint. Without delta, each scrape is
// the live set at that moment, which is what a leak hunt needs. With delta,
// the scraper adds ?seconds=<interval>, and the server's WriteTimeout and
// the scrape timeout must both exceed it.
//
// Parca (parca.yaml):
//
//	scrape_configs:
//	  - job_name: "inference"
//	    scrape_interval: "15s"
//	    static_configs:
//	      - targets: ["inference:6060"]
//	    profiling_config:
//	      pprof_config:
//	        tensors:
//	          enabled: true
//	          path: /debug/pprof/tensors
//
// Grafana Alloy, forwarding to Pyroscope:
//
//	pyroscope.scrape "tensors" {
//	  targets    = [{"__address__" = "inference:6060", "service_name" = "inference"}]
//	  forward_to = [pyroscope.write.default.receiver]
//
//	  profiling_config {
//	    profile.custom "tensors" {
//	      enabled = true
//	      path    = "/debug/pprof/tensors"
//	    }
//	  }
//	}
//
//	pyroscope.write "default" {
//	  endpoint {
//	    url = "http://pyroscope:4040"
//	  }
//	}
//
// Both also scrape the Go runtime's profiles by default (memory, block,
// goroutine, mutex, process_cpu); set enabled to false for each in a job
// that should scrape tensors alone.
//
// # Cost
//
// A profile has one sample per group and per site, so writing it costs the
// same for ten thousand live tensors as for a million on the same sites
// (BenchmarkWriteProfile: a few milliseconds for a thousand sites). Taking
// the snapshot walks the live set and grows with it; symbolizing happens
// once per site for the tracker's life. Every function here is safe for
// concurrent use.
package pprofexport
