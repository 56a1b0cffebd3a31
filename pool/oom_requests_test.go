package pool_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// A budget exhausted by 3 large requests in flight beside 100 small ones:
// the error's first open request is the largest, with its labels and age,
// and its rows plus the others make the in-flight bytes. Nothing leaked.
func TestOOMNamesLargestOpenRequests(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time { return now }
	tr, err := track.New(track.Name(t.Name()), track.Clock(clock))
	require.NoError(t, err)
	dev := newFault(t, 64<<20)
	p, err := pool.New(dev, pool.Tracker(tr), pool.Budget(16<<20))
	require.NoError(t, err)

	var held []*tensor.Tensor
	var ends []context.CancelFunc
	begin := func(labels ...string) context.Context {
		ctx, end := track.WithRequest(context.Background())
		ends = append(ends, end)
		return track.WithLabels(ctx, labels...)
	}
	for i := range 100 {
		x, err := tensor.New(begin("route", "/small", "request", fmt.Sprint(i)), p, tensor.Float32, 1024)
		require.NoError(t, err)
		held = append(held, x)
	}
	now = now.Add(time.Minute)
	var oomErr error
	for i, mib := range []int{5, 4, 3} {
		ctx := begin("route", "/generate", "prompt", fmt.Sprint(i))
		for range mib {
			x, err := tensor.New(ctx, p, tensor.Float32, 256<<10) // 1 MiB a step
			require.NoError(t, err)
			held = append(held, x)
		}
	}
	now = now.Add(30 * time.Second)
	_, oomErr = tensor.New(begin("route", "/generate", "prompt", "late"), p, tensor.Float32, 1<<20)
	require.ErrorIs(t, oomErr, tensor.ErrOutOfMemory)
	var oom *tensor.OOMError
	require.ErrorAs(t, oomErr, &oom)

	open := oom.Requests
	assert.Equal(t, 103, open.Count, "the late request holds nothing yet")
	require.NotEmpty(t, open.Largest)
	first := open.Largest[0]
	assert.Equal(t, int64(5<<20), first.InFlightBytes)
	assert.Equal(t, "{prompt=0, route=/generate}", first.Labels.String())
	assert.Equal(t, 30*time.Second, first.Age)
	assert.Equal(t, int64(4<<20), open.Largest[1].InFlightBytes)
	assert.Equal(t, int64(3<<20), open.Largest[2].InFlightBytes)
	sum := open.OthersBytes
	for _, r := range open.Largest {
		sum += r.InFlightBytes
	}
	assert.Equal(t, open.InFlightBytes, sum, "rows and others make the in-flight bytes")
	assert.Equal(t, int64(12<<20+100*4096), open.InFlightBytes)

	text := oomErr.Error()
	t.Log(text)
	assert.Contains(t, text, "largest open requests (103 open")
	assert.Contains(t, text, "1. 5 MiB in 5 tensors (31% of the limit), open 30s: {prompt=0, route=/generate}")
	assert.Contains(t, text, "98 other requests")
	assert.Contains(t, text, "most at pool_test.TestOOMNamesLargestOpenRequests")

	for _, x := range held {
		require.NoError(t, x.Free())
	}
	for _, end := range ends {
		end()
	}
	require.NoError(t, p.Close())
}
