package timeline_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/timeline"
	"github.com/tensorlife/tensorlife/track"
)

// node is an element of a parsed SVG.
type node struct {
	name     string
	attrs    map[string]string
	text     string // character data directly inside
	children []*node
}

// parseSVG parses data as XML into a tree: a picture that does not parse
// fails the test.
func parseSVG(t *testing.T, data []byte) *node {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(data))
	root := &node{}
	stack := []*node{root}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "the picture is well-formed XML")
		top := stack[len(stack)-1]
		switch tok := tok.(type) {
		case xml.StartElement:
			n := &node{name: tok.Name.Local, attrs: map[string]string{}}
			for _, a := range tok.Attr {
				n.attrs[a.Name.Local] = a.Value
			}
			top.children = append(top.children, n)
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			top.text += string(tok)
		}
	}
	require.Len(t, root.children, 1)
	svg := root.children[0]
	require.Equal(t, "svg", svg.name)
	return svg
}

// all returns the elements under n, depth first, for which keep is true.
func (n *node) all(keep func(*node) bool) []*node {
	var out []*node
	for _, c := range n.children {
		if keep(c) {
			out = append(out, c)
		}
		out = append(out, c.all(keep)...)
	}
	return out
}

func hasClass(class string) func(*node) bool {
	return func(n *node) bool { return hasField(n.attrs["class"], class) }
}

func hasField(s, f string) bool {
	for _, x := range strings.Fields(s) {
		if x == f {
			return true
		}
	}
	return false
}

// child returns n's first child element called name.
func (n *node) child(name string) *node {
	for _, c := range n.children {
		if c.name == name {
			return c
		}
	}
	return nil
}

// allText is the text of n and everything under it.
func (n *node) allText() string {
	s := n.text
	for _, c := range n.children {
		s += c.allText()
	}
	return s
}

func writeSVG(t *testing.T, tl *timeline.Timeline) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, tl.WriteSVG(&buf))
	return buf.Bytes()
}

func TestWriteSVGDrawsTheSeries(t *testing.T) {
	tr := newTracker(t, track.KeepHistory(1<<14))
	ops := run(t, tr, 300)
	tr.Books().Note(track.EventOOM, ops[0].rec.Site(), 1<<30)
	tr.Books().Note(track.EventLeakSuspect, ops[2].rec.Site(), 512)
	tr.Books().Note(track.EventMaskRebuilt, ops[2].rec.Site(), 512)
	tl, err := timeline.Build(tr, timeline.BudgetLine(256<<10), timeline.Title("decode loop"))
	require.NoError(t, err)
	svg := parseSVG(t, writeSVG(t, tl))

	assert.Equal(t, "decode loop", svg.child("title").text)
	series := svg.all(hasClass("series"))
	require.Len(t, series, len(tl.Series))
	for i, p := range series {
		assert.Equal(t, "path", p.name)
		assert.Equal(t, tl.Series[i].Name, p.attrs["data-series"])
		assert.Equal(t, strconv.FormatInt(tl.Series[i].Peak, 10), p.attrs["data-peak"])
		assert.True(t, strings.HasPrefix(p.attrs["d"], "M") && strings.HasSuffix(p.attrs["d"], "Z"), "a closed area")
		assert.Contains(t, p.child("title").text, tl.Series[i].Function, "the tooltip names the function in full")
	}
	assert.Contains(t, series[0].attrs["data-series"], "allocMask", "the leak is the bottom band")

	legend := svg.all(hasClass("legend-entry"))
	require.Len(t, legend, len(tl.Series))
	var legendNames []string
	for _, e := range legend {
		legendNames = append(legendNames, e.attrs["data-series"])
		text := e.child("text").allText()
		assert.Contains(t, text, e.attrs["data-series"], "the legend names the site")
		assert.Contains(t, text, "peak ")
		assert.Regexp(t, `\(helpers_test\.go:\d+\)`, text, "by function and file:line")
	}
	assert.ElementsMatch(t, legendNames, []string{tl.Series[0].Name, tl.Series[1].Name, tl.Series[2].Name})

	budget := svg.all(hasClass("budget"))
	require.Len(t, budget, 1)
	assert.Equal(t, "budget 256 KiB", budget[0].child("title").text)
	assert.Equal(t, "6 4", budget[0].child("line").attrs["stroke-dasharray"], "dashed")

	marks := svg.all(hasClass("marker"))
	require.Len(t, marks, 2, "OOM and suspect are drawn; a rebuilt mask is not")
	assert.True(t, hasField(marks[0].attrs["class"], "oom"))
	assert.Contains(t, marks[0].child("title").text, "OOM at ")
	assert.Contains(t, marks[0].child("title").text, "1 GiB")
	assert.True(t, hasField(marks[1].attrs["class"], "leak_suspect"))

	var yTicks, xTicks []string
	for _, n := range svg.all(hasClass("ytick")) {
		yTicks = append(yTicks, n.text)
	}
	for _, n := range svg.all(hasClass("xtick")) {
		xTicks = append(xTicks, n.text)
	}
	assert.Equal(t, []string{"0", "100 KiB", "200 KiB", "300 KiB"}, yTicks, "bytes in binary units, up to the budget")
	assert.GreaterOrEqual(t, len(xTicks), 3)
	assert.Regexp(t, `^[0-9.]+ (µs|ms|s)$`, xTicks[len(xTicks)-1], "time in human units")
}

func TestWriteSVGShortensLongNamesInTheLegendOnly(t *testing.T) {
	tr := newTracker(t, track.KeepHistory(1<<10))
	r := allocateFromAFunctionWhoseNameIsMuchTooLongToFitInTheLegendOfThePictureSoItIsShortened(t, tr)
	tl, err := timeline.Build(tr)
	require.NoError(t, err)
	svg := parseSVG(t, writeSVG(t, tl))

	fn := r.Site().Location().Function
	legend := svg.all(hasClass("legend-entry"))
	require.Len(t, legend, 1)
	shown := legend[0].child("text").text
	assert.True(t, strings.HasSuffix(shown, "…"), "cut: %q", shown)
	assert.LessOrEqual(t, utf8.RuneCountInString(shown), 60)
	assert.True(t, strings.HasPrefix(tl.Series[0].Name, strings.TrimSuffix(shown, "…")))
	assert.Contains(t, legend[0].child("title").text, fn, "the full name is in the tooltip")
	assert.Equal(t, tl.Series[0].Name, legend[0].attrs["data-series"])
}

func allocateFromAFunctionWhoseNameIsMuchTooLongToFitInTheLegendOfThePictureSoItIsShortened(t *testing.T, tr *track.Tracker) *track.Record {
	r := &track.Record{Bytes: 1 << 20, Meta: track.InternMeta("tensor", "", "", nil)}
	require.NoError(t, tr.Books().Record(context.Background(), r, 0))
	return r
}

func TestWriteSVGOfAnEmptyTimeline(t *testing.T) {
	tl, err := timeline.Build(newTracker(t, track.KeepHistory(64)), timeline.BudgetLine(1<<30))
	require.NoError(t, err)
	svg := parseSVG(t, writeSVG(t, tl))
	assert.Empty(t, svg.all(hasClass("series")))
	empty := svg.all(hasClass("empty"))
	require.Len(t, empty, 1)
	assert.Contains(t, empty[0].text, "no live memory")
	assert.Len(t, svg.all(hasClass("budget")), 1, "the budget is still drawn")
	assert.NotEmpty(t, svg.all(hasClass("ytick")))
}

func TestWriteSVGLeavesOutMarksBeyondItsBound(t *testing.T) {
	tr := newTracker(t, track.KeepHistory(1<<12))
	for range 600 {
		tr.Books().Note(track.EventOOM, nil, 1<<20)
	}
	tl, err := timeline.Build(tr)
	require.NoError(t, err)
	require.Len(t, tl.Markers, 600, "the timeline keeps them all")
	svg := parseSVG(t, writeSVG(t, tl))
	assert.Len(t, svg.all(hasClass("marker")), 500)
	legend := svg.all(hasClass("legend"))
	require.Len(t, legend, 1)
	assert.Contains(t, legend[0].allText(), "100 more marks not drawn")
	assert.Contains(t, legend[0].allText(), "OOM (500)")
}

func TestWriteSVGWritesAFarBudgetAboveTheChart(t *testing.T) {
	tr := newTracker(t, track.KeepHistory(1<<10))
	run(t, tr, 10) // about 15 KiB at most
	tl, err := timeline.Build(tr, timeline.BudgetLine(1<<30))
	require.NoError(t, err)
	svg := parseSVG(t, writeSVG(t, tl))
	budget := svg.all(hasClass("budget"))
	require.Len(t, budget, 1)
	assert.True(t, hasField(budget[0].attrs["class"], "off-scale"))
	assert.Nil(t, budget[0].child("line"), "no line: it would flatten the bands")
	assert.Contains(t, budget[0].child("text").text, "budget 1 GiB")
	var yTicks []string
	for _, n := range svg.all(hasClass("ytick")) {
		yTicks = append(yTicks, n.text)
	}
	assert.Equal(t, "15 KiB", yTicks[len(yTicks)-1], "the scale follows the data: 8 + 10×0.5 + 2 KiB at most")
}

// A stretch where the process recorded nothing (on a real clock: it was
// descheduled) is a Quiet stretch, hatched in the picture and named in the
// legend, so a flat band there does not read as a pause of the leak.
func TestWriteSVGMarksStretchesWithNoEvents(t *testing.T) {
	clk := &stepClock{now: time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC), step: time.Microsecond}
	tr := newTracker(t, track.KeepHistory(1<<14), track.Clock(clk.Now))
	run(t, tr, 100)
	clk.advance(50 * time.Millisecond) // the process stood still
	run(t, tr, 100)
	tl, err := timeline.Build(tr)
	require.NoError(t, err)
	require.Len(t, tl.Quiet, 1, "one stretch stands out: %+v", tl.Quiet)
	assert.GreaterOrEqual(t, tl.Quiet[0].To-tl.Quiet[0].From, (50 * time.Millisecond).Nanoseconds())
	svg := parseSVG(t, writeSVG(t, tl))
	quiet := svg.all(hasClass("quiet"))
	require.Len(t, quiet, 1)
	assert.Contains(t, quiet[0].allText(), "no events from ")
	assert.Contains(t, svg.all(hasClass("legend-quiet"))[0].allText(), "no events recorded (1 stretch 50")

	// A steady clock has none.
	even := newTracker(t, track.KeepHistory(1<<14), track.Clock((&stepClock{now: clk.now, step: time.Microsecond}).Now))
	run(t, even, 200)
	tl, err = timeline.Build(even)
	require.NoError(t, err)
	assert.Empty(t, tl.Quiet)
	assert.Empty(t, parseSVG(t, writeSVG(t, tl)).all(hasClass("quiet")))
}

// The allocator's reserved bytes stand beside the tensor bytes at the end,
// up to the budget line, and a band too thin to see says so in the legend.
func TestWriteSVGDrawsReservedBesideTheTensorBytes(t *testing.T) {
	tr := newTracker(t, track.KeepHistory(1<<14))
	run(t, tr, 300) // 8 KiB of weights, 150 KiB of masks, 2 KiB of logits
	tl, err := timeline.Build(tr, timeline.BudgetLine(256<<10), timeline.Reserved(256<<10))
	require.NoError(t, err)
	assert.Equal(t, int64(256<<10), tl.Reserved)
	svg := parseSVG(t, writeSVG(t, tl))
	reserved := svg.all(hasClass("reserved"))
	require.Len(t, reserved, 1)
	assert.Contains(t, reserved[0].child("title").text, "in 256 KiB reserved by the allocator")
	assert.Contains(t, reserved[0].child("title").text, "block rounding and cache")
	var thin []string
	for _, e := range svg.all(hasClass("legend-entry")) {
		if strings.Contains(e.allText(), "too thin to draw") {
			thin = append(thin, e.attrs["data-series"])
		}
	}
	require.Len(t, thin, 1, "2 KiB of 256 KiB is under a pixel and a half")
	assert.Contains(t, thin[0], "allocLogits")

	_, err = timeline.Build(tr, timeline.Reserved(0))
	require.ErrorIs(t, err, timeline.ErrInvalidOption)
}
