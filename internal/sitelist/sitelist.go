// Package sitelist turns a tracker's site figures into the lines of a site
// list (format.WriteSites), so that an out-of-memory error and a pool closed
// with live blocks name their sites, and who holds their memory, alike; and
// writes a tracker's open requests as the error and the summary list them.
package sitelist

import (
	"github.com/tensorlife/tensorlife/internal/format"
	"github.com/tensorlife/tensorlife/track"
)

// Lines renders each site by its location (track.Site.Location) with its
// live count and bytes, the frame that tells it apart from another listed
// site with the same line, and held[i], the extra owners holding site i's
// memory (track.Tracker.HeldBy; nil or short for none).
func Lines(sites []track.SiteStats, held [][]track.Holder) []format.SiteLine {
	listed := make([]*track.Site, len(sites))
	for i := range sites {
		listed[i] = sites[i].Site
	}
	out := make([]format.SiteLine, 0, len(sites))
	for i, s := range sites {
		f := s.Site.Location()
		line := format.SiteLine{Function: f.Function, File: f.File, Line: f.Line,
			Count: s.LiveCount, Bytes: s.LiveBytes, Outlived: s.OutlivedBytes}
		if via, ok := s.Site.DistinctFrame(listed); ok {
			line.Via = format.Via(via.Function, via.File, via.Line)
		}
		if i < len(held) {
			for _, h := range held[i] {
				line.Held = append(line.Held, format.HeldBy(h.String(), h.Live))
			}
		}
		out = append(out, line)
	}
	return out
}
