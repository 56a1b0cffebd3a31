package timeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/timeline"
	"github.com/tensorlife/tensorlife/track"
)

// traceFile is the JSON object form of the trace event format.
type traceFile struct {
	TraceEvents     []map[string]any `json:"traceEvents"`
	DisplayTimeUnit string           `json:"displayTimeUnit"`
	OtherData       map[string]any   `json:"otherData"`
}

// validateTrace decodes data and checks it against the trace event format
// and against tl: required fields per phase, timestamps in order, counters
// that add up to the live bytes at each sample, an instant per event.
func validateTrace(t *testing.T, data []byte, tl *timeline.Timeline) traceFile {
	t.Helper()
	var tf traceFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&tf), "the trace is JSON")
	require.NotNil(t, tf.TraceEvents)
	assert.Equal(t, "ms", tf.DisplayTimeUnit)

	num := func(ev map[string]any, key string) float64 {
		n, ok := ev[key].(json.Number)
		require.True(t, ok, "%q is a number in %v", key, ev)
		f, err := n.Float64()
		require.NoError(t, err)
		return f
	}
	var lastTS float64
	var counters, totals, instants, globals int
	liveAt := map[float64]int64{}
	for _, ev := range tf.TraceEvents {
		name, ok := ev["name"].(string)
		require.True(t, ok, "every event has a name: %v", ev)
		require.NotEmpty(t, name)
		ph, ok := ev["ph"].(string)
		require.True(t, ok, "every event has a phase: %v", ev)
		cat, ok := ev["cat"].(string)
		require.True(t, ok, "every event has a category: %v", ev)
		require.NotEmpty(t, cat)
		num(ev, "pid")
		num(ev, "tid")
		ts := num(ev, "ts")
		assert.GreaterOrEqual(t, ts, 0.0)
		args, _ := ev["args"].(map[string]any)
		switch ph {
		case "M":
			require.NotNil(t, args)
			assert.Contains(t, []string{"process_name", "thread_name"}, name)
			assert.IsType(t, "", args["name"])
			continue
		case "C":
			require.NotEmpty(t, args, "a counter has values")
			var sum int64
			for k, v := range args {
				n, ok := v.(json.Number)
				require.True(t, ok, "counter %s value %s is a number", name, k)
				i, err := n.Int64()
				require.NoError(t, err)
				assert.GreaterOrEqual(t, i, int64(0))
				sum += i
			}
			switch name {
			case "live bytes":
				require.Less(t, counters, len(tl.Times))
				assert.Len(t, args, len(tl.Series), "one value per series")
				assert.Equal(t, tl.Total[counters], sum, "the series add up to the live bytes at sample %d", counters)
				liveAt[ts] = sum
				counters++
			case "total live bytes":
				require.Less(t, totals, len(tl.Times))
				assert.Equal(t, tl.Total[totals], sum)
				if len(tl.Series) > 0 {
					assert.Equal(t, liveAt[ts], sum, "the total counter matches the series at %v", ts)
				}
				totals++
			case "budget":
				assert.Equal(t, tl.BudgetLine, sum)
			default:
				t.Errorf("unexpected counter %q", name)
			}
		case "i":
			scope, _ := ev["s"].(string)
			require.NotNil(t, args)
			num(ev["args"].(map[string]any), "bytes")
			switch scope {
			case "t":
				assert.Contains(t, []string{"alloc", "free"}, name)
				num(args, "id")
				assert.IsType(t, "", args["site"])
				instants++
			case "g":
				globals++
			default:
				t.Errorf("instant %q has scope %q", name, scope)
			}
		default:
			t.Errorf("unexpected phase %q", ph)
		}
		assert.GreaterOrEqual(t, ts, lastTS, "events in time order")
		lastTS = ts
	}
	if len(tl.Series) > 0 {
		assert.Equal(t, len(tl.Times), counters, "a counter event per sample")
	} else {
		assert.Zero(t, counters)
	}
	assert.Equal(t, len(tl.Times), totals)
	assert.Equal(t, len(tl.Markers), globals, "a global instant per marker")
	assert.Equal(t, tl.Events-len(tl.Markers), instants, "an instant per allocation and free")
	require.NotNil(t, tf.OtherData)
	return tf
}

func writeTrace(t *testing.T, tl *timeline.Timeline) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, tl.WriteTrace(&buf))
	return buf.Bytes()
}

func TestWriteTraceIsValidTraceEventFormat(t *testing.T) {
	tests := []struct {
		name    string
		history int
		steps   int
		opts    []timeline.Option
	}{
		{"every event", 1 << 14, 100, []timeline.Option{timeline.BudgetLine(1 << 20)}},
		{"downsampled", 1 << 14, 300, []timeline.Option{timeline.Samples(10)}},
		{"dropped events", 1, 2000, nil},
		{"one top site", 1 << 14, 50, []timeline.Option{timeline.Bands(1)}},
		{"no events", 64, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker(t, track.KeepHistory(tc.history))
			if tc.steps > 0 {
				ops := run(t, tr, tc.steps)
				tr.Books().Note(track.EventOOM, ops[0].rec.Site(), 1<<30)
				tr.Books().Note(track.EventLeakSuspect, ops[2].rec.Site(), 512)
			}
			tl, err := timeline.Build(tr, tc.opts...)
			require.NoError(t, err)
			tf := validateTrace(t, writeTrace(t, tl), tl)
			assert.EqualValues(t, json.Number(itoa(tl.Dropped)), tf.OtherData["dropped_events"])
			assert.EqualValues(t, json.Number(itoa(int64(tl.Events))), tf.OtherData["events"])
			if tc.steps > 0 {
				assert.Len(t, tl.Markers, 2)
			}
		})
	}
}

// traceEvent holds the fields the trace event format requires, as a strict
// parser reads them: a field left out stays nil.
type traceEvent struct {
	Name  *string         `json:"name"`
	Cat   *string         `json:"cat"`
	Phase *string         `json:"ph"`
	TS    *float64        `json:"ts"`
	PID   *int            `json:"pid"`
	TID   *int            `json:"tid"`
	Scope *string         `json:"s"`
	Args  json.RawMessage `json:"args"`
}

// A strict trace parser rejects a file whose events lack a required field:
// name, cat, ph, ts, pid and tid on every event, including the metadata
// events that name the process and threads; args with a string name on
// those; a scope on instants.
func TestWriteTraceEventsHaveEveryRequiredField(t *testing.T) {
	tr := newTracker(t, track.KeepHistory(1<<10))
	ops := run(t, tr, 20)
	tr.Books().Note(track.EventOOM, ops[0].rec.Site(), 1<<30)
	tl, err := timeline.Build(tr, timeline.BudgetLine(1<<20))
	require.NoError(t, err)

	var file struct {
		TraceEvents []json.RawMessage `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(writeTrace(t, tl), &file))
	phases := map[string]int{}
	for i, raw := range file.TraceEvents {
		var ev traceEvent
		dec := json.NewDecoder(bytes.NewReader(raw))
		require.NoError(t, dec.Decode(&ev), "event %d: %s", i, raw)
		for field, present := range map[string]bool{
			"name": ev.Name != nil, "cat": ev.Cat != nil, "ph": ev.Phase != nil,
			"ts": ev.TS != nil, "pid": ev.PID != nil, "tid": ev.TID != nil,
		} {
			require.True(t, present, "event %d lacks %q: %s", i, field, raw)
		}
		assert.NotEmpty(t, *ev.Name, "event %d: %s", i, raw)
		assert.NotEmpty(t, *ev.Cat, "event %d: %s", i, raw)
		phases[*ev.Phase]++
		switch *ev.Phase {
		case "M":
			assert.Equal(t, "__metadata", *ev.Cat, "a metadata event's category: %s", raw)
			var args struct {
				Name *string `json:"name"`
			}
			require.NoError(t, json.Unmarshal(ev.Args, &args), "event %d: %s", i, raw)
			require.NotNil(t, args.Name, "a metadata event names its process or thread: %s", raw)
		case "i":
			require.NotNil(t, ev.Scope, "an instant has a scope: %s", raw)
			assert.Contains(t, []string{"g", "p", "t"}, *ev.Scope)
			assert.Equal(t, "tensorlife", *ev.Cat)
		case "C":
			assert.NotEmpty(t, ev.Args, "a counter has values: %s", raw)
			assert.Equal(t, "tensorlife", *ev.Cat)
		default:
			t.Errorf("event %d has phase %q: %s", i, *ev.Phase, raw)
		}
	}
	assert.Equal(t, 3, phases["M"], "the process and its two threads are named")
	assert.Positive(t, phases["C"])
	assert.Positive(t, phases["i"])
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestWriteTraceMarkersAndLabels(t *testing.T) {
	tr := newTracker(t, track.KeepHistory(1<<10))
	ctx := track.WithLabels(context.Background(), "request", "r\"7\"\n", "model", "ünïcode")
	w := allocWeights(t, tr, ctx, 4096)
	tr.Books().Note(track.EventOOM, w.Site(), 1<<30)
	tr.Books().Note(track.EventLeakSuspect, nil, 64)
	tl, err := timeline.Build(tr, timeline.Title("a \"quoted\" <title>"))
	require.NoError(t, err)
	tf := validateTrace(t, writeTrace(t, tl), tl)

	byName := map[string]map[string]any{}
	for _, ev := range tf.TraceEvents {
		byName[ev["name"].(string)] = ev
	}
	oom := byName["oom"]
	require.NotNil(t, oom)
	assert.Equal(t, "g", oom["s"], "an OOM is drawn across every track")
	assert.Equal(t, json.Number("1073741824"), oom["args"].(map[string]any)["bytes"])
	assert.Contains(t, oom["args"].(map[string]any)["site"], "allocWeights")
	require.NotNil(t, byName["leak_suspect"])

	alloc := byName["alloc"]["args"].(map[string]any)
	assert.Equal(t, map[string]any{"request": "r\"7\"\n", "model": "ünïcode"}, alloc["labels"])
	assert.Equal(t, "weights", alloc["kind"])
	assert.Equal(t, json.Number("4096"), alloc["bytes"])
	assert.Equal(t, "a \"quoted\" <title>", byName["process_name"]["args"].(map[string]any)["name"])
}

var errBroken = errors.New("broken writer")

// failingWriter accepts n bytes, then fails.
type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		k := w.n
		w.n = 0
		return k, errBroken
	}
	w.n -= len(p)
	return len(p), nil
}

func TestWritersReportWriteErrors(t *testing.T) {
	tr := newTracker(t, track.KeepHistory(1<<14))
	run(t, tr, 2000) // a trace larger than one chunk
	tl, err := timeline.Build(tr)
	require.NoError(t, err)
	for _, n := range []int{0, 100 << 10} {
		assert.ErrorIs(t, tl.WriteTrace(&failingWriter{n: n}), errBroken, "trace, failing after %d bytes", n)
	}
	assert.ErrorIs(t, tl.WriteSVG(&failingWriter{}), errBroken)
}
