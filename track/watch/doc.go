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
//	watcher, err := watch.New(tracker)
//	...
//	func handle(w http.ResponseWriter, r *http.Request) {
//		ctx, end := track.WithRequest(r.Context())
//		defer watcher.Tick() // one window per request, ended after the request
//		defer end()
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
// With one Tick per request, each window is one request, and a window's
// verdict depends only on what the requests before it kept: Tick ends the
// window on the caller's goroutine, and a request's end (the end func of
// track.WithRequest) is seen by the next window at once. Tests drive such a
// watcher with Tick alone, and timed windows in a testing/synctest bubble.
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
// when its growth began) or stops growing: its outlived bytes have not
// passed their highest since the flag for 2·K windows, or for four times
// the longest stretch between two new highs since its growth began, if
// longer; but never while the memory it draws from has run out (an
// allocation on its device failed since it last grew, or the headroom
// there is below its growth per window: Suspect.RanOut). A leak stops
// growing when memory is full, the moment it matters most: it then stays a
// suspect until its bytes are freed or handed to an owner, and clears at
// once when they are. Below the budget, a plateau clears. The flag is
// strict and the clearing patient: a leak that keeps
// growing, every request, every third request or in bursts, is one suspect
// from its first flag until it stops, so an alert that waits for a suspect
// to stand for a while fires. Sites are judged at the windows in which
// they change; suspects at every window.
//
// A watcher keeps a history (8 B a window) only for the sites that changed
// within the last History windows and for the suspects, and a map entry for
// each other site with outlived bytes; a site with nothing outlived costs it
// nothing, however many sites the tracker has seen.
//
// # Forecasts
//
// Each suspect carries RunsOutIn: how long until the memory it draws from
// runs out if its outlived bytes keep growing at the rate of its windows
// since its growth began (at most History windows, from the first that
// grew, over the time they took on the tracker's clock: a test or a demo
// that fakes the tracker's time, track.Clock, fakes the watcher's). The
// tracker's parts on the suspect's device tell the memory (track.PartInfo): the smallest
// headroom of the pools with a budget there (budget less what their
// blocks hold), the rate then scaled by what the pools' blocks hold over
// their tensors' bytes (a pool rounds each tensor up); else the device's
// free memory. Neither known, or no time between the windows (counted
// windows ended at one instant), the forecast is 0: unknown. It is updated
// at each window while the site is a suspect. The model is linear and
// forecasts this leak alone: other sites' growth, a cache filling and
// in-flight memory at its peak make memory run out sooner. Measured
// against the moment a 4 MiB budget really runs out, the forecast made at
// the first flag was within 25% for a steady leak and within 40% under
// bursty traffic from several goroutines (forecast_test.go).
//
// # Handles that outlived their request
//
// A handle taken under a request (tensor.Tensor.RetainContext, a hit of
// mask.Cache.GetOrBuild) and still held when the request ended has
// outlived it: a fact, counted at the line that took it when the request
// ends (track.SiteStats.OutlivedHandles). The next window names that line
// as a suspect (Suspect.Handles), even while another holder, such as the
// cache, keeps the memory: there is no growth to wait for. It stays one
// until each such handle is freed, handed to an owner or dropped, and
// clears at the window that sees it.
//
// Suspects are reported through OnSuspect (default: a log/slog warning with
// the stack, the handles that hold the memory, the forecast and Advice),
// counted, noted in the tracker's history as track.EventLeakSuspect, and
// listed by Suspects and by package report's summary. OnSuspect runs under
// recover: a callback that panics is logged and counted (CallbackPanics),
// and neither the ticking request nor the loop of Start dies of it.
package watch
