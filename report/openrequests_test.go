package report

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/watch"
)

// openSection returns the first row under each of the Open requests
// section's lists, "largest" and "oldest".
func openSection(t *testing.T, report string) (largest, oldest string) {
	t.Helper()
	_, section, ok := strings.Cut(report, "\nOpen requests (")
	require.True(t, ok, "no Open requests section in\n%s", report)
	section, _, _ = strings.Cut(section, "\n\n")
	lines := strings.Split(section, "\n")
	for i, l := range lines {
		if i+1 < len(lines) && strings.HasPrefix(l, "  largest ") {
			largest = lines[i+1]
		}
		if i+1 < len(lines) && strings.HasPrefix(l, "  oldest ") {
			oldest = lines[i+1]
		}
	}
	return largest, oldest
}

// A worker that labels its long-lived context once and keeps 4 KiB a job
// is the first row of the summary's Open requests, the largest and the
// oldest, within 400 jobs, beside requests of its own per job; it is no
// leak suspect.
func TestSummaryOpenRequestsLongLivedWorker(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time { return now }
	tr, err := track.New(track.Name("worker"), track.Clock(clock))
	require.NoError(t, err)
	w, err := watch.New(tr)
	require.NoError(t, err)

	workerCtx, stop := context.WithCancel(context.Background())
	worker := track.WithLabels(workerCtx, "worker", "indexer")
	var kept, inFlight []*track.Record
	var ends []context.CancelFunc
	for range 400 {
		now = now.Add(time.Second)
		kept = append(kept, summaryMasks(t, worker, tr, 1, 4096)...)
		req, end := track.WithRequest(context.Background())
		scratch := summaryMasks(t, track.WithLabels(req, "job", "embed"), tr, 2, 8192)
		for _, r := range scratch {
			require.NoError(t, r.Release())
		}
		end()
		require.NoError(t, w.Tick())
	}
	for range 3 { // requests in flight beside the worker, each larger than a job
		req, end := track.WithRequest(context.Background())
		ends = append(ends, end)
		inFlight = append(inFlight, summaryMasks(t, track.WithLabels(req, "route", "/generate"), tr, 4, 16<<10)...)
	}
	require.NoError(t, w.Tick())

	var buf bytes.Buffer
	require.NoError(t, WriteSummary(&buf, tr))
	report := buf.String()
	t.Log(report)
	assertFits(t, report)
	largest, oldest := openSection(t, report)
	assert.Contains(t, largest, "1.")
	assert.Contains(t, largest, "1.6 MiB")
	assert.Contains(t, largest, "{worker=indexer}")
	assert.Contains(t, oldest, "{worker=indexer}")
	assert.Contains(t, oldest, "6m39s")
	assert.Contains(t, report, "Open requests (4 open, ")
	assert.Zero(t, w.SuspectCount(), "in flight is never judged")

	for _, end := range ends {
		end()
	}
	stop()
	for _, r := range append(kept, inFlight...) {
		require.NoError(t, r.Release())
	}
	buf.Reset()
	require.NoError(t, WriteSummary(&buf, tr))
	assert.NotContains(t, buf.String(), "Open requests", "no section when none is open")
}

// The summary shows what each kind of request cost: requests, peak p50,
// p99 and max, outlived bytes.
func TestSummaryRequestKinds(t *testing.T) {
	tr, err := track.New(track.Name("kinds"), track.RequestKinds("route"))
	require.NoError(t, err)
	for i := range 10 {
		ctx, end := track.WithRequest(context.Background())
		recs := summaryMasks(t, track.WithLabels(ctx, "route", "/generate"), tr, i+1, 1<<20)
		for _, r := range recs {
			require.NoError(t, r.Release())
		}
		end()
	}
	ctx, end := track.WithRequest(context.Background())
	kept := summaryMasks(t, ctx, tr, 1, 4096) // no route: kind other, and it outlives its request
	end()

	var buf bytes.Buffer
	require.NoError(t, WriteSummary(&buf, tr))
	report := buf.String()
	t.Log(report)
	assertFits(t, report)
	assert.Contains(t, report, "\nRequest kinds (")
	assert.Regexp(t, `route=/generate\s+cuda:0\s+10\s+5 MiB\s+10 MiB\s+10 MiB\s+0 B\n`, report)
	assert.Regexp(t, `other\s+cuda:0\s+1\s+4 KiB\s+4 KiB\s+4 KiB\s+4 KiB\n`, report)
	require.NoError(t, (kept[0]).Release())
}
