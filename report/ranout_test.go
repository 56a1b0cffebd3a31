package report

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/watch"
)

//go:noinline
func summaryLeakThatFillsTheBudget(ctx context.Context, p *pool.Pool) (*tensor.Tensor, error) {
	return tensor.New(ctx, p, tensor.Uint8, 64<<10)
}

// A leak that filled its pool's budget stays in the summary's Leak suspects,
// with its line and the fact that its memory ran out, however long after it
// stopped growing the summary is written.
func TestSummaryNamesALeakThatFilledTheBudget(t *testing.T) {
	tr, err := track.New(track.Name("full"))
	require.NoError(t, err)
	dev, err := tensor.NewHostDevice(64 << 20)
	require.NoError(t, err)
	p, err := pool.New(dev, pool.Tracker(tr), pool.Budget(1<<20))
	require.NoError(t, err)
	w, err := watch.New(tr, watch.OnSuspect(func(watch.Suspect) {}))
	require.NoError(t, err)
	var kept []*tensor.Tensor
	refused := 0
	for range 100 { // 16 blocks fill the budget; then every request runs out
		ctx, end := track.WithRequest(context.Background())
		x, err := summaryLeakThatFillsTheBudget(ctx, p)
		if errors.Is(err, tensor.ErrOutOfMemory) {
			refused++
		} else {
			require.NoError(t, err)
			kept = append(kept, x)
		}
		end()
		require.NoError(t, w.Tick())
	}
	require.Equal(t, 84, refused)

	var buf bytes.Buffer
	require.NoError(t, WriteSummary(&buf, tr))
	out := buf.String()
	flat := strings.Join(strings.Fields(out), " ")
	assertFits(t, out)
	assert.NotContains(t, out, "  none\n", "the suspect is listed")
	assert.Contains(t, out, "summaryLeakThatFillsTheBudget")
	assert.Contains(t, flat, "memory ran out: 84 allocations on host failed for lack of memory since it last grew; "+
		"it stays a suspect until its bytes are freed or handed to an owner")

	for _, x := range kept {
		require.NoError(t, x.Free())
	}
	require.NoError(t, w.Tick())
	buf.Reset()
	require.NoError(t, WriteSummary(&buf, tr))
	assert.Contains(t, buf.String(), "  none\n", "freed: no suspect")
}
