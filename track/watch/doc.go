// Package watch names leak suspects in a running service: the call sites
// whose memory that outlived its request keeps growing.
//
// A tensor made under a request (track.WithRequest, or the first
// track.WithLabels on a context that ends with the request) and still live
// when the request ends has outlived it; the tracker counts those bytes per
// site as requests end, O(1) per tensor. Memory in flight (activations, the
// KV cache of a running request), however large, however long the request
// and however many run at once, is never judged: by construction, not by
// tuning. What a cache keeps on purpose is handed to a track.Owner; an owner
// with a byte bound is never judged, one without is judged like any site.
//
//	w, err := watch.New(tracker)
//	...
//	func handle(w http.ResponseWriter, r *http.Request) {
//		ctx := track.WithLabels(r.Context(), "route", "generate")
//		defer watcher.Tick() // one window per request
//		...
//	}
//
// # Windows and rules
//
// A window ends every EveryTicks calls of Tick (default one) or every Every
// interval (Run or Start). Each watcher's windows are its own: a watcher
// made, stopped or dropped never changes another's verdicts. A window end
// reads only the sites whose outlived bytes changed since the last one
// (track.SiteFeed) and the current suspects: O(sites that changed), never a
// walk of every site or of the live set.
//
// A site becomes a suspect when, over the last K windows (Windows), its
// outlived bytes grew in at least MostOf of them, by more than MinGrowth and
// by more than everything it gave back (its one-window drops) over the
// History windows the watcher remembers: a leak takes and never gives back,
// while a site that swings around a level gives back about what it takes.
// A sparse leak, one that keeps something every few windows, is a slow-leak
// suspect once its outlived bytes grew in MostOf windows of a run of at
// least History windows that never shrank, by more than MinGrowth. A
// suspect clears when it falls back to its baseline (what had outlived
// when its growth began) or stops growing for K windows (a slow one: for
// twice its usual interval between steps, if longer). Sites are judged at
// the windows in which they change; suspects at every window.
//
// Suspects are reported through OnSuspect (default: a log/slog warning with
// the stack and the handles that hold the memory), counted, noted in the
// tracker's history as track.EventLeakSuspect, and listed by Suspects and by
// package report's summary.
package watch
