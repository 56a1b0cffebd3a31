// Package timeline turns a tracker's event history into a picture of live
// memory by call site over time, and into a trace that Perfetto
// (ui.perfetto.dev) opens as it is.
//
// A leak is a shape over time: one band that keeps widening while the others
// breathe with each request. A table of live sites shows where memory is
// now; a timeline shows which site keeps growing.
//
// # Use
//
// Turn the history on when making the tracker, then build and write:
//
//	tr, _ := track.New(track.KeepHistory(1 << 20))
//	// ... run the service or the test ...
//	tl, err := timeline.Build(tr, timeline.BudgetLine(limit))
//	if err != nil { ... }
//	err = tl.WriteSVGFile("live.svg")     // open in a browser
//	err = tl.WriteTraceFile("live.json")  // open in ui.perfetto.dev
//
// Build returns an error matching track.ErrHistoryOff when the tracker was
// made without track.KeepHistory. The picture (WriteSVG) stacks live bytes by
// the top sites (Bands, default 8) with the rest as "other", draws a budget
// (BudgetLine) as a dashed line and OOMs, leak suspects and GC-found leaks
// as marks, and names each site in the legend by function and file:line,
// saying of a band too thin to see that it is. A site's colour is its
// function's, the same in every picture. Reserved draws the allocator's
// reserved bytes beside the tensor bytes at the end (what stands between
// the bands and the budget when memory runs out), and stretches with no
// event at all (Timeline.Quiet: on a real clock, the process was
// descheduled) are hatched, so a flat band there is not read as a pause.
// Both end with the workload's last event, however long after it Build is
// called. The trace (WriteTrace) holds a counter per top site, an instant
// per allocation and free, and a global instant per OOM or suspect. The file
// writers replace the file atomically: on any error no partial file is
// left. The series are also in the Timeline value, for tests that assert a
// site grew or stayed flat.
//
// # What the history cannot keep
//
// The history is bounded: track.KeepHistory(n) keeps the last n events and
// counts what it overwrites. Build rebuilds the series exactly over the
// window in which no event is missing, walking back from the live bytes per
// site at the time of the call, and says what lies before it
// (Timeline.Dropped, Timeline.Omitted, the picture's subtitle, the trace's
// otherData). Build is exact when nothing allocates while it reads the
// tracker; under concurrent allocation the series may be off by the
// allocations made while it reads.
//
// # Cost
//
// Build walks the window twice and allocates per site and per sample, not
// per event. WriteTrace streams with no allocation per event: about a
// million events a second is the floor it is measured against (see the
// package's benchmarks). The picture's size grows with samples (Samples,
// default 1000) times series, not with events.
package timeline
