package report

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
)

// Reports a leak callback was not given, because it fell 4096 behind, are
// a row of the summary's Totals; the leaks themselves are counted above it.
func TestSummaryShowsLostLeakReports(t *testing.T) {
	unblock := make(chan struct{})
	quiet := slog.New(slog.DiscardHandler) // the loss is logged once; the test reads the summary
	tr, err := track.New(track.Name("lost"), track.Logger(quiet), track.OnLeak(func(track.LeakReport) { <-unblock }))
	require.NoError(t, err)
	var recs []*track.Record
	for range 4100 {
		r := &track.Record{Bytes: 8}
		require.NoError(t, tr.Books().Record(context.Background(), r, 0))
		r.ReportDropped(nil, "")
		recs = append(recs, r)
	}
	lost := tr.Totals().LeakReportsLost
	require.Positive(t, lost, "at most one report inside the callback and 4096 waiting")
	var b strings.Builder
	require.NoError(t, WriteSummary(&b, tr))
	assert.Regexp(t, fmt.Sprintf(`leak reports lost +%d \(a leak callback fell 4096 reports behind`, lost), b.String())
	assert.Regexp(t, `GC-detected leaks +4100\n`, b.String())
	close(unblock)
	tr.Books().WaitLeaks()
	for _, r := range recs {
		require.NoError(t, r.Release())
	}
}
