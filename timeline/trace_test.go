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
				tr.Note(track.EventOOM, ops[0].rec.Site(), 1<<30)
				tr.Note(track.EventLeakSuspect, ops[2].rec.Site(), 512)
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

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestWriteTraceMarkersAndLabels(t *testing.T) {
	tr := newTracker(t, track.KeepHistory(1<<10))
	ctx := track.WithLabels(context.Background(), "request", "r\"7\"\n", "model", "ünïcode")
	w := allocWeights(t, tr, ctx, 4096)
	tr.Note(track.EventOOM, w.Site(), 1<<30)
	tr.Note(track.EventLeakSuspect, nil, 64)
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
