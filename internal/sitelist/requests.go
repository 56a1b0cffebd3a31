package sitelist

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/tensorlife/tensorlife/internal/format"
	"github.com/tensorlife/tensorlife/track"
)

// LabelsWidth is how many bytes of a request's labels a request list
// prints: past it they are cut, at a rune boundary, and end in "…". The
// out-of-memory error and the summary document it.
const LabelsWidth = 120

// CutLabels renders l as Labels.String does, cut at LabelsWidth bytes.
func CutLabels(l track.Labels) string {
	s := l.String()
	if len(s) <= LabelsWidth {
		return s
	}
	n := LabelsWidth - len("…")
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// WriteRequests writes a numbered list of open requests under a title, each
// as
//
//  1. 360 MiB in 8 tensors (92% of the limit), open 12.5s: {route=/generate}
//     most at main.prefill (server.go:88): 300 MiB
//
// and, when the open requests hold more than rows do, a last line with the
// others, so that the rows and the others make open.InFlightBytes. limit,
// when positive, is what each row's share is of. Nothing is written for no
// open request.
func WriteRequests(b *strings.Builder, title string, open track.OpenRequests, rows []track.RequestStats, limit int64) {
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
		fmt.Fprintf(b, ", open %s: %s", format.Age(r.Age), CutLabels(r.Labels))
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
