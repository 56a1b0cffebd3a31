package track

import (
	"context"
	"time"

	"github.com/tensorlife/tensorlife/internal/hotpath"
)

// The operations of allocator implementers and tools (recording,
// releasing, capture, feeds, parts) are package track/trackalloc's API.
// They live here, unexported, beside the registry they touch, and reach
// trackalloc through internal/hotpath. Each skip gains the two frames of
// the trackalloc function and of the hook.
func init() {
	hotpath.Track = hotpath.TrackFuncs{
		Record: func(ctx context.Context, t, r any, skip int) error {
			return t.(*Tracker).record(ctx, r.(*Record), skip+2)
		},
		Release: func(t, r any) error { return t.(*Tracker).release(r.(*Record)) },
		SetLabels: func(t, r, l any) error {
			return t.(*Tracker).setLabels(r.(*Record), l.(Labels))
		},
		HandOver: func(t, r, o any) error { return t.(*Tracker).handOver(r.(*Record), o.(*Owner)) },
		HandBack: func(t, r any) error { return t.(*Tracker).handBack(r.(*Record)) },
		ReportDropped: func(t, r, site any, how string) bool {
			return t.(*Tracker).reportDropped(r.(*Record), site.(*Site), how)
		},
		Hold:   func(r, site any, how string) { r.(*Record).hold(site.(*Site), how) },
		Unhold: func(r, site any, how string) { r.(*Record).unhold(site.(*Site), how) },
		Note: func(t, k, site any, bytes int64) {
			t.(*Tracker).noteKind(k.(EventKind), site.(*Site), bytes)
		},
		NoteMisuse: func(t, r, k, site any) {
			t.(*Tracker).noteMisuse(r.(*Record), k.(EventKind), site.(*Site))
		},
		RequestOf: func(r any) any {
			if q := r.(*Record).req; q != nil {
				return q
			}
			return nil
		},
		MadeUnder: func(req any, ctx context.Context) bool {
			q, _ := req.(*request)
			return madeUnder(q, ctx)
		},
		History: func(t any, grow func(n int), put func(hotpath.Event)) (time.Time, int64, int64, int, bool) {
			tr := t.(*Tracker)
			dropped, until, capacity, ok := tr.history(grow, func(e *event) {
				put(hotpath.Event{Kind: e.Kind, Time: e.Time, ID: e.ID, Bytes: e.Bytes, Site: e.Site,
					AllocKind: e.AllocKind, Device: e.Device, Labels: e.Labels})
			})
			return tr.start, dropped, until, capacity, ok
		},
		Counts: func(t any) func() any {
			c := t.(*Tracker).counts()
			return func() any { return c.snapshot(Filter{LabelKeys: []string{}}) }
		},
		Now: func(t any) time.Time { return t.(*Tracker).wallNow() },
		LiveByClass: func(t any, f func(device, kind string, count, bytes int64)) {
			t.(*Tracker).liveByClass(f)
		},
		Caller:     func(t any, skip, depth int) any { return t.(*Tracker).caller(skip+2, depth) },
		CallerSite: func(t any, skip int) any { return t.(*Tracker).callerSite(skip + 2) },
		Intern:     func(t any, pcs []uintptr) any { return t.(*Tracker).intern(pcs) },
		FreeLine:   func(t any, skip int) uint32 { return t.(*Tracker).freeLine(skip + 2) },
		FreeSite: func(t any, n uint32) (any, bool) {
			return t.(*Tracker).freeSite(n)
		},
		HeldBy: func(t, sites any, max int) any { return t.(*Tracker).heldBy(sites.([]*Site), max) },
		WatchLeaks: func(t, f any) func() {
			return t.(*Tracker).watchLeaks(f.(func(LeakReport)))
		},
		SiteFeed:    func(t any) any { return t.(*Tracker).siteFeedOf() },
		FeedChanged: func(f, dst any) any { return f.(*siteFeed).changed(dst.([]SiteStats)) },
		FeedClose:   func(f any) { f.(*siteFeed).close() },
		Attach:      func(t, key any, get func() any) { t.(*Tracker).attachKey(key, get) },
		Detach:      func(t, key any) { t.(*Tracker).detachKey(key) },
		Parts:       func(t any) []any { return t.(*Tracker).partList() },
		Local:       func(t, key any, mk func() any) any { return t.(*Tracker).localOf(key, mk) },
	}
}
