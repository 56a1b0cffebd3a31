package timeline

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"io"
	"path"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/tensorlife/tensorlife/internal/format"

	"github.com/tensorlife/tensorlife/track"
)

// Picture layout, in pixels.
const (
	svgWidth     = 960
	plotLeft     = 92
	plotRight    = 64 // room for the reserved column (Reserved)
	plotTop      = 72
	plotHeight   = 360
	legendRow    = 20
	legendGap    = 58 // from the plot's bottom to the first legend row
	maxLegendLen = 60 // runes of a site's name shown in the legend
	// maxMarks bounds the markers drawn, so a run that hit thousands of
	// OOMs still gives a picture a browser opens; the trace lists them all.
	maxMarks = 500
	// budgetScale is how far above the highest total the budget may be and
	// still set the scale; a budget further away would flatten the bands
	// into a line, so it is written above the chart instead.
	budgetScale = 4
)

// palette holds the series colours: eleven hues a reader tells apart at a
// glance, every two at least 30 apart in CIELAB (ΔE*ab; the palette this
// replaced had two teals 4 apart), and far from the markers' reds, orange,
// purple and brown. A site's colour comes from a hash of its function, file
// name and line, never its directory, so one line keeps its colour across
// runs, pictures (the leaky and the fixed run side by side) and checkouts;
// a clash moves to the next free colour, and once all are taken colours
// repeat, never on two adjacent bands.
var palette = []string{
	"#0077bb", "#99ddff", "#66c2a5", "#117733", "#a6d854", "#ffd92f",
	"#e5c494", "#b07aa1", "#332288", "#ff9da7", "#882255",
}

const otherColor = "#cfcfcf"

// minVisible is the height in pixels under which a band cannot be seen:
// its legend entry says so.
const minVisible = 3

// reservedColor fills the part of the reserved column above the tensor
// bytes (dark grey).
const reservedColor = "#bdbdbd"

// markStyle is how a marker kind is drawn; kinds without one are counted in
// the picture but not drawn (a rebuilt mask happens at every step of a
// leaking loop and would cover the picture).
var markStyle = map[track.EventKind]struct{ color, label string }{
	track.EventOOM:         {"#d62728", "OOM"},
	track.EventLeakSuspect: {"#ff7f0e", "leak suspect"},
	track.EventGCLeak:      {"#9467bd", "GC-found leak"},
	track.EventDoubleFree:  {"#8c564b", "double free"},
}

// WriteSVG writes the timeline as a self-contained SVG picture: live bytes
// over time stacked by series (largest at the bottom, "other" on top), the
// budget as a dashed line, OOMs, leak suspects, GC-found leaks and double
// frees as vertical marks, axes in human units (B to GiB, µs to min) and a
// legend naming each series by function and file:line. Every series,
// legend entry and mark carries a <title>, which viewers show as a tooltip,
// with the full name; long names are shortened in the legend only. Series
// paths carry class "series", the attribute data-series with the series
// name and data-peak with its peak in bytes.
//
// An empty timeline gives a valid picture that says so. w is not closed.
func (tl *Timeline) WriteSVG(w io.Writer) error {
	if err := tl.writeSVG(w); err != nil {
		return fmt.Errorf("timeline: write svg: %w", err)
	}
	return nil
}

func (tl *Timeline) writeSVG(w io.Writer) error {
	sw := &svgWriter{tl: tl}
	sw.write()
	_, err := w.Write(sw.buf)
	return err
}

type svgWriter struct {
	tl  *Timeline
	buf []byte
	x   axis // time
	y   axis // bytes
	// budgetOff: the budget is too far above the data to set the scale.
	budgetOff bool
	maxTotal  int64
}

func (sw *svgWriter) s(parts ...string) {
	for _, p := range parts {
		sw.buf = append(sw.buf, p...)
	}
}

// text appends s escaped for XML text and attribute values.
func (sw *svgWriter) text(s string) { sw.buf = appendXML(sw.buf, s) }

func (sw *svgWriter) num(v float64) {
	sw.buf = strconv.AppendFloat(sw.buf, float64(int64(v*10+0.5*sign(v)))/10, 'f', -1, 64)
}

func sign(v float64) float64 {
	if v < 0 {
		return -1
	}
	return 1
}

func (sw *svgWriter) px(t int64) float64 {
	return plotLeft + float64(t-sw.tl.From)/sw.x.top*plotWidth
}

func (sw *svgWriter) py(bytes int64) float64 {
	return plotTop + plotHeight - float64(bytes)/sw.y.top*plotHeight
}

const plotWidth = svgWidth - plotLeft - plotRight

func (sw *svgWriter) write() {
	tl := sw.tl
	for _, v := range tl.Total {
		sw.maxTotal = max(sw.maxTotal, v)
	}
	sw.x = timeAxis(tl.From, tl.To)
	sw.budgetOff = tl.BudgetLine > 0 && sw.maxTotal > 0 && tl.BudgetLine/budgetScale > sw.maxTotal
	if sw.budgetOff {
		sw.y = bytesAxis(max(sw.maxTotal, tl.Reserved))
	} else {
		sw.y = bytesAxis(max(sw.maxTotal, tl.BudgetLine, tl.Reserved))
	}
	marks, skipped := sw.marksToDraw()
	kinds := markKinds(marks)
	rows := len(tl.Series) + len(kinds)
	if skipped > 0 {
		rows++
	}
	if tl.Reserved > 0 && len(tl.Total) > 0 {
		rows++
	}
	if len(tl.Quiet) > 0 {
		rows++
	}
	height := plotTop + plotHeight + legendGap + rows*legendRow + 12

	sw.s(`<?xml version="1.0" encoding="UTF-8"?>`, "\n")
	sw.s(`<svg xmlns="http://www.w3.org/2000/svg" width="`, strconv.Itoa(svgWidth), `" height="`, strconv.Itoa(height),
		`" viewBox="0 0 `, strconv.Itoa(svgWidth), " ", strconv.Itoa(height), `" font-family="sans-serif" font-size="12">`, "\n")
	sw.s(`<title>`)
	sw.text(tl.Title)
	sw.s("</title>\n", `<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">`,
		`<rect width="6" height="6" fill="#ffffff" fill-opacity="0.4"/><line x1="0" y1="0" x2="0" y2="6" stroke="#999999" stroke-width="1.5"/>`,
		"</pattern></defs>\n")
	sw.s(`<rect width="100%" height="100%" fill="#ffffff"/>`, "\n")
	sw.s(`<text x="`, strconv.Itoa(plotLeft), `" y="26" font-size="18" font-weight="bold">`)
	sw.text(tl.Title)
	sw.s("</text>\n", `<text x="`, strconv.Itoa(plotLeft), `" y="48" fill="#555555">`)
	sw.text(sw.summary())
	sw.s("</text>\n")

	sw.grid()
	sw.series()
	sw.quiet()
	sw.reserved()
	sw.budget()
	for _, m := range marks {
		sw.mark(m)
	}
	sw.axes()
	sw.legend(kinds, skipped)
	sw.s("</svg>\n")
}

// summary is the line under the title: the window and what is missing.
func (sw *svgWriter) summary() string {
	tl := sw.tl
	s := fmt.Sprintf("%s to %s · %s events · peak %s", formatDuration(tl.From), formatDuration(tl.To),
		formatCount(int64(tl.Events)), format.Bytes(tl.Peak))
	if tl.BudgetLine > 0 {
		s += " · budget " + format.Bytes(tl.BudgetLine)
	}
	if tl.Dropped > 0 {
		s += fmt.Sprintf(" · history full: %s older events dropped", formatCount(tl.Dropped+int64(tl.Omitted)))
	} else {
		s += " · no events dropped"
	}
	return s
}

func (sw *svgWriter) grid() {
	sw.s(`<g class="grid" stroke="#e6e6e6" stroke-width="1">`, "\n")
	for _, v := range sw.y.ticks() {
		y := sw.py(int64(v))
		sw.s(`<line x1="`, strconv.Itoa(plotLeft), `" x2="`, strconv.Itoa(plotLeft+plotWidth), `" y1="`)
		sw.num(y)
		sw.s(`" y2="`)
		sw.num(y)
		sw.s(`"/>`, "\n")
	}
	sw.s("</g>\n")
}

// series draws each band as a step area: a value holds from its sample to
// the next, as live bytes do between events.
func (sw *svgWriter) series() {
	tl := sw.tl
	if len(tl.Series) == 0 {
		sw.s(`<text class="empty" x="`)
		sw.num(plotLeft + plotWidth/2)
		sw.s(`" y="`)
		sw.num(plotTop + plotHeight/2)
		sw.s(`" text-anchor="middle" fill="#777777">no live memory recorded in this window</text>`, "\n")
		return
	}
	colors := seriesColors(tl.Series)
	n := len(tl.Times)
	lower := make([]int64, n)
	upper := make([]int64, n)
	xs := make([]float64, n)
	for k, t := range tl.Times {
		xs[k] = sw.px(t)
	}
	sw.s(`<g class="bands" stroke="none">`, "\n")
	for i := range tl.Series {
		ser := &tl.Series[i]
		for k := range n {
			upper[k] = lower[k] + ser.Values[k]
		}
		sw.s(`<path class="series" id="series-`, strconv.Itoa(i), `" data-series="`)
		sw.text(ser.Name)
		sw.s(`" data-peak="`, strconv.FormatInt(ser.Peak, 10), `" fill="`, colors[i], `" d="`)
		sw.area(xs, lower, upper)
		sw.s(`"><title>`)
		sw.text(fullName(ser))
		sw.text(fmt.Sprintf("\npeak %s, at the end %s", format.Bytes(ser.Peak), format.Bytes(ser.Values[n-1])))
		sw.s("</title></path>\n")
		lower, upper = upper, lower
	}
	sw.s("</g>\n")
}

// area appends the path of the band between lower and upper, upper edge
// forwards and lower edge back, skipping steps too small to see.
func (sw *svgWriter) area(xs []float64, lower, upper []int64) {
	n := len(xs)
	sw.s("M")
	sw.num(xs[0])
	sw.s(",")
	y := round1(sw.py(upper[0]))
	sw.num(y)
	for k := 1; k < n; k++ {
		if ny := round1(sw.py(upper[k])); ny != y {
			sw.s("H")
			sw.num(xs[k])
			sw.s("V")
			sw.num(ny)
			y = ny
		}
	}
	sw.s("H")
	sw.num(xs[n-1])
	y = round1(sw.py(lower[n-1]))
	sw.s("V")
	sw.num(y)
	for k := n - 1; k > 0; k-- {
		if ny := round1(sw.py(lower[k-1])); ny != y {
			sw.s("H")
			sw.num(xs[k])
			sw.s("V")
			sw.num(ny)
			y = ny
		}
	}
	sw.s("H")
	sw.num(xs[0])
	sw.s("Z")
}

// quiet hatches the stretches with no event (Timeline.Quiet) over the
// bands, so that a band flat there is not read as a pause of its site.
func (sw *svgWriter) quiet() {
	if len(sw.tl.Quiet) == 0 {
		return
	}
	sw.s(`<g class="quiet">`, "\n")
	for _, q := range sw.tl.Quiet {
		x0, x1 := sw.px(q.From), sw.px(q.To)
		sw.s(`<rect x="`)
		sw.num(x0)
		sw.s(`" y="`, strconv.Itoa(plotTop), `" width="`)
		sw.num(max(x1-x0, 1))
		sw.s(`" height="`, strconv.Itoa(plotHeight), `" fill="url(#hatch)"><title>`)
		sw.text(fmt.Sprintf("no events from %s to %s (%s): the process recorded nothing here, "+
			"descheduled or waiting; no site paused", formatDuration(q.From), formatDuration(q.To), formatDuration(q.To-q.From)))
		sw.s("</title></rect>\n")
		if x1-x0 >= 56 {
			sw.s(`<text x="`)
			sw.num((x0 + x1) / 2)
			sw.s(`" y="`, strconv.Itoa(plotTop+14), `" text-anchor="middle" fill="#444444">no events</text>`, "\n")
		}
	}
	sw.s("</g>\n")
}

// reserved draws, right of the plot at the window's end, what the
// allocator held (Timeline.Reserved) over the tensor bytes: the part above
// them is its rounding to block sizes and its cached blocks, what stands
// between the bands and the budget line when memory runs out.
func (sw *svgWriter) reserved() {
	tl := sw.tl
	if tl.Reserved <= 0 || len(tl.Total) == 0 {
		return
	}
	tensors := tl.Total[len(tl.Total)-1]
	x := strconv.Itoa(plotLeft + plotWidth + 8)
	sw.s(`<g class="reserved"><title>`)
	sw.text(sw.reservedText(tensors))
	sw.s(`</title><rect x="`, x, `" width="16" y="`)
	sw.num(sw.py(tensors))
	sw.s(`" height="`)
	sw.num(sw.py(0) - sw.py(tensors))
	sw.s(`" fill="#555555"/>`)
	if tl.Reserved > tensors {
		sw.s(`<rect x="`, x, `" width="16" y="`)
		sw.num(sw.py(tl.Reserved))
		sw.s(`" height="`)
		sw.num(sw.py(tensors) - sw.py(tl.Reserved))
		sw.s(`" fill="`, reservedColor, `" stroke="#555555"/>`)
	}
	sw.s("</g>\n")
}

func (sw *svgWriter) reservedText(tensors int64) string {
	tl := sw.tl
	s := fmt.Sprintf("right, at the end: %s of tensors (dark) in %s reserved by the allocator", format.Bytes(tensors), format.Bytes(tl.Reserved))
	if tl.Reserved > tensors {
		s += fmt.Sprintf(" (light: +%s, block rounding and cache)", format.Bytes(tl.Reserved-tensors))
	}
	return s
}

func round1(v float64) float64 { return float64(int64(v*10+0.5*sign(v))) / 10 }

func (sw *svgWriter) budget() {
	tl := sw.tl
	if tl.BudgetLine <= 0 {
		return
	}
	if sw.budgetOff {
		sw.s(`<g class="budget off-scale"><title>budget `, format.Bytes(tl.BudgetLine), `</title><text x="`,
			strconv.Itoa(plotLeft+plotWidth-4), `" y="`, strconv.Itoa(plotTop-8), `" text-anchor="end" fill="#222222">`)
		sw.text(fmt.Sprintf("↑ budget %s, %s× the peak, is above the chart", format.Bytes(tl.BudgetLine),
			formatNumber(float64(tl.BudgetLine)/float64(sw.maxTotal), 0)))
		sw.s("</text></g>\n")
		return
	}
	y := sw.py(tl.BudgetLine)
	sw.s(`<g class="budget"><title>budget `, format.Bytes(tl.BudgetLine), `</title><line x1="`, strconv.Itoa(plotLeft),
		`" x2="`, strconv.Itoa(plotLeft+plotWidth), `" y1="`)
	sw.num(y)
	sw.s(`" y2="`)
	sw.num(y)
	sw.s(`" stroke="#222222" stroke-width="1.5" stroke-dasharray="6 4"/><text x="`, strconv.Itoa(plotLeft+plotWidth-4), `" y="`)
	sw.num(y - 5)
	sw.s(`" text-anchor="end" fill="#222222">budget `, format.Bytes(tl.BudgetLine), "</text></g>\n")
}

// marksToDraw returns the markers the picture draws and how many drawable
// ones it leaves out.
func (sw *svgWriter) marksToDraw() ([]Marker, int) {
	var out []Marker
	skipped := 0
	for _, m := range sw.tl.Markers {
		if _, ok := markStyle[m.Kind]; !ok {
			continue
		}
		if len(out) == maxMarks {
			skipped++
			continue
		}
		out = append(out, m)
	}
	return out, skipped
}

// markKinds returns the drawn kinds in a fixed order, with their counts.
func markKinds(marks []Marker) []kindCount {
	var counts [8]int
	for _, m := range marks {
		if int(m.Kind) < len(counts) {
			counts[m.Kind]++
		}
	}
	var out []kindCount
	for _, k := range []track.EventKind{track.EventOOM, track.EventLeakSuspect, track.EventGCLeak, track.EventDoubleFree} {
		if counts[k] > 0 {
			out = append(out, kindCount{k, counts[k]})
		}
	}
	return out
}

type kindCount struct {
	kind  track.EventKind
	count int
}

func (sw *svgWriter) mark(m Marker) {
	st := markStyle[m.Kind]
	x := sw.px(m.Time)
	sw.s(`<g class="marker `, m.Kind.String(), `"><title>`)
	desc := fmt.Sprintf("%s at %s: %s", st.label, formatDuration(m.Time), format.Bytes(m.Bytes))
	if m.Name != "" {
		desc += "\n" + markerSite(m)
	}
	sw.text(desc)
	sw.s(`</title><line x1="`)
	sw.num(x)
	sw.s(`" x2="`)
	sw.num(x)
	sw.s(`" y1="`, strconv.Itoa(plotTop), `" y2="`, strconv.Itoa(plotTop+plotHeight), `" stroke="`, st.color,
		`" stroke-width="1.5" stroke-opacity="0.8"/><circle cx="`)
	sw.num(x)
	sw.s(`" cy="`, strconv.Itoa(plotTop-5), `" r="4" fill="`, st.color, `"/></g>`, "\n")
}

func markerSite(m Marker) string {
	if m.Site == nil {
		return m.Name
	}
	f := m.Site.Location()
	return fmt.Sprintf("%s\n%s:%d", f.Function, f.File, f.Line)
}

func (sw *svgWriter) axes() {
	bottom := plotTop + plotHeight
	sw.s(`<g class="axes" fill="#333333">`, "\n")
	sw.s(`<line x1="`, strconv.Itoa(plotLeft), `" x2="`, strconv.Itoa(plotLeft), `" y1="`, strconv.Itoa(plotTop),
		`" y2="`, strconv.Itoa(bottom), `" stroke="#333333"/>`, "\n")
	sw.s(`<line x1="`, strconv.Itoa(plotLeft), `" x2="`, strconv.Itoa(plotLeft+plotWidth), `" y1="`, strconv.Itoa(bottom),
		`" y2="`, strconv.Itoa(bottom), `" stroke="#333333"/>`, "\n")
	for _, v := range sw.y.ticks() {
		sw.s(`<text class="ytick" x="`, strconv.Itoa(plotLeft-6), `" y="`)
		sw.num(sw.py(int64(v)) + 4)
		sw.s(`" text-anchor="end">`, sw.y.label(v), "</text>\n")
	}
	for _, v := range sw.x.ticks() {
		x := plotLeft + (v-sw.x.lo)/sw.x.top*plotWidth
		sw.s(`<text class="xtick" x="`)
		sw.num(x)
		sw.s(`" y="`, strconv.Itoa(bottom+18), `" text-anchor="middle">`)
		sw.text(sw.x.label(v))
		sw.s("</text>\n")
	}
	sw.s(`<text x="`, strconv.Itoa(plotLeft+plotWidth/2), `" y="`, strconv.Itoa(bottom+38),
		`" text-anchor="middle">time since the tracker started</text>`, "\n")
	sw.s(`<text transform="translate(18 `, strconv.Itoa(plotTop+plotHeight/2), `) rotate(-90)" text-anchor="middle">live bytes</text>`, "\n")
	sw.s("</g>\n")
}

func (sw *svgWriter) legend(kinds []kindCount, skipped int) {
	tl := sw.tl
	colors := seriesColors(tl.Series)
	y := plotTop + plotHeight + legendGap
	sw.s(`<g class="legend">`, "\n")
	for i := len(tl.Series) - 1; i >= 0; i-- { // top band first, as stacked
		ser := &tl.Series[i]
		sw.s(`<g class="legend-entry" data-series="`)
		sw.text(ser.Name)
		sw.s(`"><title>`)
		sw.text(fullName(ser))
		sw.s(`</title><rect x="`, strconv.Itoa(plotLeft), `" y="`, strconv.Itoa(y-10), `" width="12" height="12" fill="`,
			colors[i], `"/><text x="`, strconv.Itoa(plotLeft+18), `" y="`, strconv.Itoa(y), `">`)
		sw.text(truncate(ser.Name, maxLegendLen))
		sw.s(`<tspan dx="10" fill="#777777">`)
		peak := "peak " + format.Bytes(ser.Peak)
		if sw.py(0)-sw.py(ser.Peak) < minVisible {
			peak += ", too thin to draw at this scale"
		}
		sw.text(peak)
		sw.s("</tspan></text></g>\n")
		y += legendRow
	}
	for _, kc := range kinds {
		st := markStyle[kc.kind]
		sw.s(`<g class="legend-marker"><line x1="`, strconv.Itoa(plotLeft+6), `" x2="`, strconv.Itoa(plotLeft+6), `" y1="`,
			strconv.Itoa(y-11), `" y2="`, strconv.Itoa(y+3), `" stroke="`, st.color, `" stroke-width="2"/><text x="`,
			strconv.Itoa(plotLeft+18), `" y="`, strconv.Itoa(y), `">`)
		sw.text(fmt.Sprintf("%s (%d)", st.label, kc.count))
		sw.s("</text></g>\n")
		y += legendRow
	}
	if tl.Reserved > 0 && len(tl.Total) > 0 {
		sw.s(`<g class="legend-reserved"><rect x="`, strconv.Itoa(plotLeft), `" y="`, strconv.Itoa(y-10),
			`" width="6" height="12" fill="#555555"/><rect x="`, strconv.Itoa(plotLeft+6), `" y="`, strconv.Itoa(y-10),
			`" width="6" height="12" fill="`, reservedColor, `"/><text x="`, strconv.Itoa(plotLeft+18), `" y="`, strconv.Itoa(y), `">`)
		sw.text(sw.reservedText(tl.Total[len(tl.Total)-1]))
		sw.s("</text></g>\n")
		y += legendRow
	}
	if len(tl.Quiet) > 0 {
		var longest int64
		for _, q := range tl.Quiet {
			longest = max(longest, q.To-q.From)
		}
		sw.s(`<g class="legend-quiet"><rect x="`, strconv.Itoa(plotLeft), `" y="`, strconv.Itoa(y-10),
			`" width="12" height="12" fill="url(#hatch)"/><text x="`, strconv.Itoa(plotLeft+18), `" y="`, strconv.Itoa(y), `">`)
		what := "1 stretch"
		if len(tl.Quiet) > 1 {
			what = strconv.Itoa(len(tl.Quiet)) + " stretches, the longest"
		}
		sw.text(fmt.Sprintf("no events recorded (%s %s): the process was descheduled or waiting, no site paused",
			what, formatDuration(longest)))
		sw.s("</text></g>\n")
		y += legendRow
	}
	if skipped > 0 {
		sw.s(`<text x="`, strconv.Itoa(plotLeft+18), `" y="`, strconv.Itoa(y), `" fill="#777777">`)
		sw.text(fmt.Sprintf("%d more marks not drawn (the trace lists them all)", skipped))
		sw.s("</text>\n")
	}
	sw.s("</g>\n")
}

// fullName is a series' tooltip: the function, the file and line in full,
// and the first call stack behind it.
func fullName(s *Series) string {
	if s.Other() {
		return fmt.Sprintf("other: the %d sites not shown on their own", s.Sites)
	}
	name := fmt.Sprintf("%s\n%s:%d", s.Function, s.File, s.Line)
	if s.Device != "" {
		name += "\non " + s.Device
	}
	if s.Sites > 1 {
		name += fmt.Sprintf("\n(%d call stacks)", s.Sites)
	}
	return name
}

// truncate shortens s to n runes, ending in an ellipsis when cut.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i, runes := 0, 0
	for i < len(s) && runes < n-1 {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		runes++
	}
	return s[:i] + "…"
}

// seriesColors gives each series its colour (see palette): the hue its
// function hashes to, whatever else the picture shows, so a site keeps its
// colour in every picture of a program and between two programs. Series
// that share a hue (two lines of one function, one line on two devices, a
// hash clash) take its shades in turn, in an order that does not depend on
// the picture either (by device, then line), and adjacent bands never
// share a colour.
func seriesColors(series []Series) []string {
	out := make([]string, len(series))
	var order []int
	for i := range series {
		if series[i].Other() {
			out[i] = otherColor
			continue
		}
		order = append(order, i)
	}
	slices.SortStableFunc(order, func(a, b int) int {
		sa, sb := &series[a], &series[b]
		return cmp.Or(cmp.Compare(colorIndex(sa), colorIndex(sb)), cmp.Compare(sa.Device, sb.Device),
			cmp.Compare(sa.Function, sb.Function), cmp.Compare(path.Base(sa.File), path.Base(sb.File)),
			cmp.Compare(sa.Line, sb.Line))
	})
	shade := make([]int, len(series))
	taken := make(map[int]int, len(palette))
	for _, i := range order {
		c := colorIndex(&series[i])
		shade[i] = taken[c]
		taken[c]++
	}
	for _, i := range order {
		c := colorIndex(&series[i])
		out[i] = shadeOf(palette[c], shade[i])
	}
	// A hue with more series than shades repeats a shade: keep it off
	// the band underneath.
	for i := 1; i < len(series); i++ {
		for k := 1; out[i] == out[i-1] && !series[i].Other() && k < len(shadeMix); k++ {
			out[i] = shadeOf(palette[colorIndex(&series[i])], shade[i]+k)
		}
	}
	return out
}

// shadeMix are a hue's shades: itself, lighter, darker, lightest; a
// positive mix lightens toward white, a negative one darkens toward black.
var shadeMix = []float64{0, 0.5, -0.35, 0.75}

// shadeOf returns shade k of colour hex (#rrggbb).
func shadeOf(hex string, k int) string {
	mix := shadeMix[k%len(shadeMix)]
	if mix == 0 {
		return hex
	}
	v, err := strconv.ParseUint(hex[1:], 16, 32)
	if err != nil {
		return hex
	}
	var b [3]uint64
	for i := range b {
		c := float64(v >> (16 - 8*i) & 0xff)
		if mix < 0 {
			c *= 1 + mix
		} else {
			c += (255 - c) * mix
		}
		b[i] = uint64(c + 0.5)
	}
	return fmt.Sprintf("#%02x%02x%02x", b[0], b[1], b[2])
}

// colorIndex is the palette index a series' function hashes to: not its
// file's directory (it differs between checkouts), nor its line (an edit
// above it moves it), nor its device (one line on two devices is one
// site).
func colorIndex(s *Series) int {
	h := fnv.New32a()
	h.Write([]byte(s.Function))
	return int(h.Sum32() % uint32(len(palette)))
}

// appendXML appends s escaped for XML text and attribute values. Runes XML
// 1.0 does not allow, and invalid UTF-8, become U+FFFD.
func appendXML(b []byte, s string) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '&':
				b = append(b, "&amp;"...)
			case c == '<':
				b = append(b, "&lt;"...)
			case c == '>':
				b = append(b, "&gt;"...)
			case c == '"':
				b = append(b, "&quot;"...)
			case c == '\'':
				b = append(b, "&apos;"...)
			case c == '\n':
				b = append(b, "&#10;"...)
			case c == '\t' || c == '\r':
				b = append(b, "&#"...)
				b = strconv.AppendInt(b, int64(c), 10)
				b = append(b, ';')
			case c < 0x20:
				b = append(b, "\uFFFD"...)
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || r == 0xFFFE || r == 0xFFFF {
			b = append(b, "\uFFFD"...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return b
}
