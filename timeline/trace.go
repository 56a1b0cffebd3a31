package timeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/tensorlife/tensorlife/internal/format"
	"github.com/tensorlife/tensorlife/track"
)

// Trace layout: one process, whose name is the title; its thread 1 holds
// the counters and the global markers, thread 2 an instant per allocation
// and free, so the per-event rows can be folded away in the viewer.
const (
	tracePID        = 1
	counterTID      = 1
	eventTID        = 2
	liveCounter     = "live bytes"
	totalCounter    = "total live bytes"
	budgetCounter   = "budget"
	traceCategory   = "tensorlife"
	metaCategory    = "__metadata" // the category the format gives metadata events
	flushThreshold  = 60 << 10
	traceBufferSize = 64 << 10
)

// WriteTrace writes the timeline as a trace in the Chrome JSON trace event
// format, which ui.perfetto.dev opens as it is:
//
//   - a counter event "live bytes" at each sample, one argument per series,
//     which Perfetto shows as one counter track per site
//     ("live bytes <site>"); a counter "total live bytes"; and,
//     with a BudgetLine, a counter "budget";
//   - an instant event per allocation and free in the window (thread
//     "allocations"), with the id, bytes, site, kind and labels;
//   - a global instant per marker (OOMs, leak suspects, GC-found leaks...),
//     drawn across every track;
//   - under "otherData", the window and what the history dropped.
//
// Every event carries the fields a strict parser of the format requires:
// name, cat, ph, ts, pid and tid (metadata events in the "__metadata"
// category, the others in "tensorlife"). Timestamps are microseconds since
// the tracker's start. The writer streams
// with no per-event allocation; w is written in chunks of about 64 KiB and
// not closed. The first write error stops it and is returned.
func (tl *Timeline) WriteTrace(w io.Writer) error {
	if err := tl.writeTrace(w); err != nil {
		return fmt.Errorf("timeline: write trace: %w", err)
	}
	return nil
}

func (tl *Timeline) writeTrace(w io.Writer) error {
	tw := &traceWriter{w: w, buf: make([]byte, 0, traceBufferSize), tl: tl}
	tw.write()
	return tw.err
}

type traceWriter struct {
	w   io.Writer
	buf []byte
	err error
	tl  *Timeline

	sites      [][]byte               // `,"site":"…"` by group, encoded once
	series     [][]byte               // each series' name as a JSON string, encoded once
	markSites  map[*track.Site][]byte // `,"site":"…"` of markers, by site
	kinds      map[string][]byte
	lastKind   string
	lastKindJS []byte
	labels     map[track.Labels][]byte
	lastLabels track.Labels
	lastLabJS  []byte
}

func (tw *traceWriter) flush() {
	if tw.err == nil && len(tw.buf) > 0 {
		_, tw.err = tw.w.Write(tw.buf)
	}
	tw.buf = tw.buf[:0]
}

func (tw *traceWriter) maybeFlush() {
	if len(tw.buf) >= flushThreshold {
		tw.flush()
	}
}

func (tw *traceWriter) write() {
	tl := tw.tl
	tw.buf = append(tw.buf, `{"traceEvents":[`...)
	tw.metadata("process_name", 0, tl.Title)
	tw.buf = append(tw.buf, ',')
	tw.metadata("thread_name", counterTID, "live memory")
	tw.buf = append(tw.buf, ',')
	tw.metadata("thread_name", eventTID, "allocations")

	tw.sites = make([][]byte, len(tl.groups))
	for g := range tl.groups {
		tw.sites[g] = appendJSONString(append([]byte(nil), `,"site":`...), tl.groups[g].name)
	}
	tw.series = make([][]byte, len(tl.Series))
	for i := range tl.Series {
		tw.series[i] = appendJSONString(nil, tl.Series[i].Name)
	}
	tw.kinds = map[string][]byte{}
	tw.labels = map[track.Labels][]byte{}

	// Events and samples are merged by time; a sample follows the events at
	// its instant, since it holds the bytes after them.
	events := tl.events
	i := 0
	for k, t := range tl.Times {
		for ; i < len(events) && events[i].Time <= t; i++ {
			if tw.event(&events[i]); tw.err != nil {
				return
			}
		}
		if tw.sample(k); tw.err != nil {
			return
		}
	}
	tw.buf = append(tw.buf, "],\n"...)
	tw.otherData()
	tw.buf = append(tw.buf, "}\n"...)
	tw.flush()
}

func (tw *traceWriter) metadata(name string, tid int, value string) {
	tw.buf = append(tw.buf, `{"name":"`...)
	tw.buf = append(tw.buf, name...)
	tw.buf = append(tw.buf, `","cat":"`+metaCategory+`","ph":"M","ts":0,"pid":1,"tid":`...)
	tw.buf = strconv.AppendInt(tw.buf, int64(tid), 10)
	tw.buf = append(tw.buf, `,"args":{"name":`...)
	tw.buf = appendJSONString(tw.buf, value)
	tw.buf = append(tw.buf, "}}\n"...)
}

// head starts an event: `,{"name":…,"ph":…,"ts":…,"pid":1,"tid":…`.
func (tw *traceWriter) head(name, ph string, ts int64, tid int) {
	tw.buf = append(tw.buf, `,{"name":"`...)
	tw.buf = append(tw.buf, name...) // names are constants without escapes
	tw.buf = append(tw.buf, `","cat":"`+traceCategory+`","ph":"`...)
	tw.buf = append(tw.buf, ph...)
	tw.buf = append(tw.buf, `","ts":`...)
	tw.buf = appendMicros(tw.buf, ts)
	tw.buf = append(tw.buf, `,"pid":1,"tid":`...)
	tw.buf = strconv.AppendInt(tw.buf, int64(tid), 10)
}

func (tw *traceWriter) sample(k int) {
	tl := tw.tl
	t := tl.Times[k]
	if len(tl.Series) > 0 {
		tw.head(liveCounter, "C", t, counterTID)
		tw.buf = append(tw.buf, `,"args":{`...)
		for s := range tl.Series {
			if s > 0 {
				tw.buf = append(tw.buf, ',')
			}
			tw.buf = append(tw.buf, tw.series[s]...)
			tw.buf = append(tw.buf, ':')
			tw.buf = strconv.AppendInt(tw.buf, tl.Series[s].Values[k], 10)
		}
		tw.buf = append(tw.buf, "}}\n"...)
	}
	tw.head(totalCounter, "C", t, counterTID)
	tw.buf = append(tw.buf, `,"args":{"bytes":`...)
	tw.buf = strconv.AppendInt(tw.buf, tl.Total[k], 10)
	tw.buf = append(tw.buf, "}}\n"...)
	if tl.BudgetLine > 0 && (k == 0 || k == len(tl.Times)-1) {
		tw.head(budgetCounter, "C", t, counterTID)
		tw.buf = append(tw.buf, `,"args":{"bytes":`...)
		tw.buf = strconv.AppendInt(tw.buf, tl.BudgetLine, 10)
		tw.buf = append(tw.buf, "}}\n"...)
	}
	tw.maybeFlush()
}

func (tw *traceWriter) event(e *track.Event) {
	if changesBytes(e.Kind) {
		tw.head(e.Kind.String(), "i", e.Time, eventTID)
		tw.buf = append(tw.buf, `,"s":"t","args":{"id":`...)
		tw.buf = strconv.AppendUint(tw.buf, e.ID, 10)
		tw.buf = append(tw.buf, `,"bytes":`...)
		tw.buf = strconv.AppendInt(tw.buf, e.Bytes, 10)
		tw.buf = append(tw.buf, tw.siteJSON(e.Site, e.Device)...)
	} else {
		tw.head(e.Kind.String(), "i", e.Time, counterTID)
		tw.buf = append(tw.buf, `,"s":"g","args":{"bytes":`...)
		tw.buf = strconv.AppendInt(tw.buf, e.Bytes, 10)
		if e.ID != 0 {
			tw.buf = append(tw.buf, `,"id":`...)
			tw.buf = strconv.AppendUint(tw.buf, e.ID, 10)
		}
		if e.Site != nil {
			tw.buf = append(tw.buf, tw.markerSiteJSON(e.Site)...)
		}
	}
	if e.AllocKind != "" {
		tw.buf = append(tw.buf, tw.kindJSON(e.AllocKind)...)
	}
	if e.Labels.Len() > 0 {
		tw.buf = append(tw.buf, tw.labelsJSON(e.Labels)...)
	}
	tw.buf = append(tw.buf, "}}\n"...)
	tw.maybeFlush()
}

// siteJSON encodes `,"site":"…"` for an allocation event: its group's name,
// encoded once per group; the site's own label for a site without a group.
func (tw *traceWriter) siteJSON(site *track.Site, device string) []byte {
	if site == nil {
		return appendJSONString([]byte(`,"site":`), format.UnknownFunction)
	}
	if g, _ := tw.tl.groupAt(site, device); g >= 0 {
		return tw.sites[g]
	}
	return tw.markerSiteJSON(site)
}

// markerSiteJSON encodes `,"site":"…"` for a marker's site, once per site:
// a leaking loop rebuilds a mask at one line thousands of times.
func (tw *traceWriter) markerSiteJSON(site *track.Site) []byte {
	js, ok := tw.markSites[site]
	if !ok {
		if tw.markSites == nil {
			tw.markSites = map[*track.Site][]byte{}
		}
		js = appendJSONString([]byte(`,"site":`), label(site.Location()))
		tw.markSites[site] = js
	}
	return js
}

// kindJSON encodes `,"kind":"…"`. Allocation kinds are few and repeat in
// runs, so the last one is kept at hand before the map.
func (tw *traceWriter) kindJSON(kind string) []byte {
	if kind == tw.lastKind && tw.lastKindJS != nil {
		return tw.lastKindJS
	}
	js, ok := tw.kinds[kind]
	if !ok {
		js = appendJSONString([]byte(`,"kind":`), kind)
		tw.kinds[kind] = js
	}
	tw.lastKind, tw.lastKindJS = kind, js
	return js
}

// labelsJSON encodes `,"labels":{…}`. Label sets are shared by every
// allocation of a request, so each is encoded once.
func (tw *traceWriter) labelsJSON(l track.Labels) []byte {
	if l == tw.lastLabels && tw.lastLabJS != nil {
		return tw.lastLabJS
	}
	js, ok := tw.labels[l]
	if !ok {
		js = []byte(`,"labels":{`)
		first := true
		l.Range(func(k, v string) bool {
			if !first {
				js = append(js, ',')
			}
			first = false
			js = appendJSONString(js, k)
			js = append(js, ':')
			js = appendJSONString(js, v)
			return true
		})
		js = append(js, '}')
		tw.labels[l] = js
	}
	tw.lastLabels, tw.lastLabJS = l, js
	return js
}

func (tw *traceWriter) otherData() {
	tl := tw.tl
	b := append(tw.buf, `"displayTimeUnit":"ms",`+"\n"+`"otherData":{"title":`...)
	b = appendJSONString(b, tl.Title)
	b = append(b, `,"tracker_start":`...)
	b = appendJSONString(b, tl.Start.Format(time.RFC3339Nano))
	b = append(b, `,"window_from_us":`...)
	b = appendMicros(b, tl.From)
	b = append(b, `,"window_to_us":`...)
	b = appendMicros(b, tl.To)
	for _, f := range []struct {
		name  string
		value int64
	}{
		{"events", int64(tl.Events)},
		{"dropped_events", tl.Dropped},
		{"omitted_events", int64(tl.Omitted)},
		{"history_capacity", int64(tl.Capacity)},
		{"samples", int64(len(tl.Times))},
		{"peak_bytes", tl.Peak},
		{"budget_bytes", tl.BudgetLine},
	} {
		b = append(b, `,"`...)
		b = append(b, f.name...)
		b = append(b, `":`...)
		b = strconv.AppendInt(b, f.value, 10)
	}
	tw.buf = append(b, '}')
}

// appendMicros writes nanoseconds as microseconds with up to three decimals.
func appendMicros(b []byte, ns int64) []byte {
	if ns < 0 {
		b = append(b, '-')
		ns = -ns
	}
	b = strconv.AppendInt(b, ns/1000, 10)
	frac := ns % 1000
	if frac == 0 {
		return b
	}
	b = append(b, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
	for b[len(b)-1] == '0' {
		b = b[:len(b)-1]
	}
	return b
}

// appendJSONString appends s as a JSON string, escaped by encoding/json:
// invalid UTF-8 becomes U+FFFD, so the output always parses. HTML
// characters are left as they are ("<autogenerated>" stays readable). It
// allocates: the writer calls it once per distinct string, never per
// event.
func appendJSONString(b []byte, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes; the buffer cannot fail
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}
