package report_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/report"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
	"github.com/tensorlife/tensorlife/track/watch"
)

// viewLine is the line keepView makes its View at, set on its first call.
var viewLine int

// keepView makes a tensor under ctx, keeps a View of it and frees the
// tensor: the View alone holds its memory, the leak of a decoder that
// caches a slice of each step's output.
//
//go:noinline
func keepView(ctx context.Context, p *pool.Pool) (*tensor.Tensor, error) {
	x, err := tensor.New(ctx, p, tensor.Float32, 1024)
	if err != nil {
		return nil, err
	}
	_, _, line, _ := runtime.Caller(0)
	viewLine = line + 2
	v, err := x.View(0, 16)
	return v, errors.Join(err, x.Free())
}

// A View leak is described the same way, "held by a View made at
// holders_test.go:N (report_test.keepView)", by the tracktest report,
// the watcher's suspect, the summary and the out-of-memory error.
func TestEverySurfaceNamesTheOwnerAlike(t *testing.T) {
	var logged bytes.Buffer
	tr, err := track.New(track.Name("holders"), track.Logger(slog.New(slog.NewTextHandler(&logged, nil))))
	require.NoError(t, err)
	dev, err := tensor.NewHostDevice(4 << 20)
	require.NoError(t, err)
	p, err := pool.New(dev, pool.Tracker(tr), pool.Budget(256<<10))
	require.NoError(t, err)
	w, err := watch.New(tr, watch.EveryTicks(1), watch.Windows(4), watch.MostOf(3), watch.MinGrowth(0))
	require.NoError(t, err)

	var views []*tensor.Tensor
	var oomErr error
	for oomErr == nil {
		ctx, end := track.WithRequest(context.Background())
		v, err := keepView(ctx, p)
		end()
		if err != nil {
			oomErr = err
			break
		}
		views = append(views, v)
		require.NoError(t, w.Tick())
	}
	defer func() {
		for _, v := range views {
			require.NoError(t, v.Free())
		}
	}()
	// The one description; each surface adds how many handles it counts.
	owner := fmt.Sprintf("held by a View made at holders_test.go:%d (report_test.keepView)", viewLine)

	var oom *tensor.OOMError
	require.ErrorAs(t, oomErr, &oom)
	assert.Contains(t, oomErr.Error(), fmt.Sprintf("\n       %s, %d handles", owner, len(views)),
		"the out-of-memory error counts the site's handles")

	suspects := w.Suspects()
	require.Len(t, suspects, 1)
	require.Len(t, suspects[0].HeldBy, 1)
	atFlag := fmt.Sprintf("%s, %d handles", owner, suspects[0].HeldBy[0].Live)
	assert.Contains(t, logged.String(), atFlag, "the watcher's log, when it flagged the site")
	var summary strings.Builder
	require.NoError(t, report.WriteSummary(&summary, tr)) // the watcher is found on the tracker
	assert.Contains(t, summary.String(), "\n      "+atFlag+"\n", "the summary's suspect")

	leakErr := tracktest.Find(tr, tracktest.MaxSettle(0))
	require.ErrorIs(t, leakErr, tracktest.ErrLeaked)
	assert.Equal(t, len(views), strings.Count(leakErr.Error(), "\n      "+owner+"\n"),
		"the tracktest report, under each tensor")
}
