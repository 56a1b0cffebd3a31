package tensor

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/tensorlife/tensorlife/internal/format"
	"github.com/tensorlife/tensorlife/track"
)

// labelsWidth is how many bytes of a request's labels a request list
// prints: past it they are cut, at a rune boundary, and end in "…". The
// out-of-memory error documents it.
const labelsWidth = 120

// cutLabels renders l as Labels.String does, cut at labelsWidth bytes.
func cutLabels(l track.Labels) string {
	s := l.String()
	if len(s) <= labelsWidth {
		return s
	}
	n := labelsWidth - len("…")
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// WriteSites writes sites as a numbered list under title, as tensorlife's
// errors list their live sites (an OOMError, a pool closed with live
// blocks), each as
//
//  1. 13.2 MiB in 10073 tensors: main.(*agent).decode
//     /src/agent.go:72
//     via main.(*agent).step (agent.go:40)
//     held by a View made at agent.go:75 (main.(*agent).decode)
//
// with the frame that tells it apart from another listed site with the same
// line, the bytes of it that outlived their request, and held[i], the extra
// owners holding site i's memory (Books.HeldBy; nil or short for none). An
// allocator's own errors can list the sites that hold its memory the same
// way. Nothing is written for no site.
func WriteSites(b *strings.Builder, title string, sites []track.SiteStats, held [][]track.Holder) {
	format.WriteSites(b, title, siteLines(sites, held))
}

// siteLines renders each site by its location (track.Site.Location) with
// its live count and bytes, the frame that tells it apart from another
// listed site with the same line, and held[i], the extra owners holding
// site i's memory.
func siteLines(sites []track.SiteStats, held [][]track.Holder) []format.SiteLine {
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

// writeRequests writes a numbered list of open requests under a title, each
// as
//
//  1. 360 MiB in 8 tensors (92% of the limit), open 12.5s: {route=/generate}
//     most at main.prefill (server.go:88): 300 MiB
//
// and, when the open requests hold more than rows do, a last line with the
// others, so that the rows and the others make open.InFlightBytes. limit,
// when positive, is what each row's share is of. Nothing is written for no
// open request.
func writeRequests(b *strings.Builder, title string, open track.OpenRequests, rows []track.RequestStats, limit int64) {
	if open.Count == 0 {
		return
	}
	fmt.Fprintf(b, "\n  %s (%d open, %s in %d %s in flight):", title, open.Count,
		format.Bytes(open.InFlightBytes), open.InFlightTensors, plural(open.InFlightTensors, "tensor"))
	var shown, shownTensors int64
	for i, r := range rows {
		shown += r.InFlightBytes
		shownTensors += r.InFlightTensors
		fmt.Fprintf(b, "\n  %d. %s in %d %s", i+1, format.Bytes(r.InFlightBytes), r.InFlightTensors, plural(r.InFlightTensors, "tensor"))
		if limit > 0 {
			fmt.Fprintf(b, " (%.0f%% of the limit)", 100*float64(r.InFlightBytes)/float64(limit))
		}
		fmt.Fprintf(b, ", open %s: %s", format.Age(r.Age), cutLabels(r.Labels))
		if r.PeakBytes > r.InFlightBytes {
			fmt.Fprintf(b, "\n       peak %s", format.Bytes(r.PeakBytes))
		}
		if r.TopSite != nil {
			f := r.TopSite.Location()
			fmt.Fprintf(b, "\n       most at %s (%s:%d): %s", format.Function(f.Function), format.File(f.File), f.Line,
				format.Bytes(r.TopSiteBytes))
		}
	}
	if others := open.Count - len(rows); others > 0 {
		fmt.Fprintf(b, "\n  +  %d other %s: %s in %d %s", others, plural(int64(others), "request"),
			format.Bytes(open.InFlightBytes-shown), open.InFlightTensors-shownTensors,
			plural(open.InFlightTensors-shownTensors, "tensor"))
	}
}

func plural(n int64, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}
