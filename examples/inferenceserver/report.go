package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tensorlife/tensorlife/report"
	"github.com/tensorlife/tensorlife/track"
)

// errLiveAtShutdown means tensors were still live once the server had
// drained its requests and closed its cache: memory nothing would free.
var errLiveAtShutdown = errors.New("tensors still live at shutdown")

// reportSites is how many call sites a shutdown report names.
const reportSites = 5

// liveTensorsError is Shutdown's report of tensors still live, with the
// call sites holding the most bytes. A leak of thousands of tensors reads
// as a handful of lines, one per site, which is what the reader must fix.
// It matches errLiveAtShutdown.
type liveTensorsError struct {
	count, bytes int64
	sites        []track.SiteStats // most live bytes first
	moreSites    int               // sites with live tensors beyond those listed
}

// liveError reads the tracker's live sites into a report.
func (s *server) liveError() *liveTensorsError {
	snap, _ := s.tr.SnapshotOf(track.Filter{}) // the zero filter is valid
	top := snap.Top(len(snap.Sites))
	e := &liveTensorsError{count: snap.Totals.LiveCount, bytes: snap.Totals.LiveBytes}
	e.sites = top[:min(reportSites, len(top))]
	e.moreSites = len(top) - len(e.sites)
	return e
}

func (e *liveTensorsError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d tensors (%s) still live at shutdown, at:", e.count, report.Bytes(e.bytes))
	for i, s := range e.sites {
		f := s.Site.Location()
		fmt.Fprintf(&b, "\n  %d. %s in %d tensors: %s\n       %s:%d", i+1, report.Bytes(s.LiveBytes),
			s.LiveCount, f.Function, f.File, f.Line)
	}
	if e.moreSites > 0 {
		fmt.Fprintf(&b, "\n  and %d more sites", e.moreSites)
	}
	return b.String()
}

// Is reports whether target is errLiveAtShutdown.
func (e *liveTensorsError) Is(target error) bool { return target == errLiveAtShutdown }

// topSite names the site holding the most live bytes, for a one-line log.
func (e *liveTensorsError) topSite() string {
	if len(e.sites) == 0 {
		return "none"
	}
	return e.sites[0].Site.String()
}
