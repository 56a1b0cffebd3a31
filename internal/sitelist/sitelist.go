// Package sitelist turns a tracker's site figures into the lines of a site
// list (format.WriteSites), so that an out-of-memory error and a pool closed
// with live blocks name their sites alike.
package sitelist

import (
	"github.com/tensorlife/tensorlife/internal/format"
	"github.com/tensorlife/tensorlife/track"
)

// Lines renders each site by its location (track.Site.Location) with its
// live count and bytes.
func Lines(sites []track.SiteStats) []format.SiteLine {
	out := make([]format.SiteLine, 0, len(sites))
	for _, s := range sites {
		f := s.Site.Location()
		out = append(out, format.SiteLine{Function: f.Function, File: f.File, Line: f.Line,
			Count: s.LiveCount, Bytes: s.LiveBytes, Outlived: s.OutlivedBytes})
	}
	return out
}
