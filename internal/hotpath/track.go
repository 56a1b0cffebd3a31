package hotpath

import (
	"context"
	"time"
)

// Package track's operations for allocator implementers and tools reach
// package track/trackalloc through Track: track keeps them unexported, so
// that its API is what programs use, and fills Track at init; trackalloc,
// the package implementers import, calls them with their real types. The
// values are track's types passed as any, since this package cannot name
// them without an import cycle; each hook asserts them back at once.

// TrackFuncs are track's implementer operations; see track/trackalloc for what
// each does. Skips count from the caller of the trackalloc function.
type TrackFuncs struct {
	Record        func(ctx context.Context, t, r any, skip int) error
	Release       func(t, r any) error
	SetLabels     func(t, r, labels any) error
	HandOver      func(t, r, owner any) error
	HandBack      func(t, r any) error
	ReportDropped func(t, r, site any, how string) bool
	Hold          func(r, site any, how string)
	Unhold        func(r, site any, how string)
	Note          func(t, kind, site any, bytes int64)
	NoteMisuse    func(t, r, kind, site any)
	RequestOf     func(r any) any
	MadeUnder     func(req any, ctx context.Context) bool
	History       func(t any, grow func(n int), put func(Event)) (start time.Time, dropped, droppedUntil int64, capacity int, ok bool) // put runs under a shard lock, unsorted
	Counts        func(t any) (snapshot func() any)
	LiveByClass   func(t any, f func(device, kind string, count, bytes int64))
	Now           func(t any) time.Time
	Caller        func(t any, skip, depth int) any
	CallerSite    func(t any, skip int) any
	Intern        func(t any, pcs []uintptr) any
	FreeLine      func(t any, skip int) uint32
	FreeSite      func(t any, n uint32) (site any, deferred bool)
	HeldBy        func(t, sites any, max int) any
	WatchLeaks    func(t, f any) (stop func())
	SiteFeed      func(t any) any
	FeedChanged   func(feed, dst any) any
	FeedClose     func(feed any)
	Attach        func(t, key any, get func() any)
	Detach        func(t, key any)
	Parts         func(t any) []any
	Local         func(t, key any, mk func() any) any
}

// Track holds track's operations from its init on.
var Track TrackFuncs

// Event is one event of a tracker's history on its way to trackalloc:
// Kind is a track.EventKind, Site a *track.Site, Labels a track.Labels.
type Event struct {
	Kind      any
	Time      int64
	ID        uint64
	Bytes     int64
	Site      any
	AllocKind string
	Device    string
	Labels    any
}
