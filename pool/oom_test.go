package pool_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

// keepSmall allocates a few tensors from a second site, so the report has to
// rank sites rather than name the only one.
func keepSmall(ctx context.Context, p *pool.Pool, n int) ([]*tensor.Tensor, error) {
	var out []*tensor.Tensor
	for range n {
		x, err := tensor.New(ctx, p, tensor.Float32, 128)
		if err != nil {
			return out, err
		}
		out = append(out, x)
	}
	return out, nil
}

// TestOOMNamesLeakingSite leaks on purpose, as the agent service did: it
// keeps every step's mask alive until the budget runs out. The error text
// alone must name this function and the line that allocates.
func TestOOMNamesLeakingSite(t *testing.T) {
	dev := newFault(t, 4<<20)
	tr := newTracker(t)
	p, err := pool.New(dev, pool.Tracker(tr), pool.Budget(1<<20), pool.TopSites(2))
	require.NoError(t, err)
	ctx := context.Background()

	small, err := keepSmall(ctx, p, 4)
	require.NoError(t, err)
	var leaked []*tensor.Tensor
	var oomErr error
	_, file, line, _ := runtime.Caller(0)
	for step := 0; step < 1000 && oomErr == nil; step++ {
		mask, err := tensor.New(ctx, p, tensor.Float32, 16, 256) // the leaking line: line+2
		if err != nil {
			oomErr = err
			break
		}
		leaked = append(leaked, mask)
	}
	leakLine := line + 2
	require.Error(t, oomErr, "the leak never ran out of budget")
	require.ErrorIs(t, oomErr, tensor.ErrOutOfMemory)

	var oom *tensor.OOMError
	require.ErrorAs(t, oomErr, &oom)
	require.Len(t, oom.TopSites, 2)
	top := oom.TopSites[0]
	loc := top.Site.Location()
	assert.Equal(t, "github.com/tensorlife/tensorlife/pool_test.TestOOMNamesLeakingSite", loc.Function)
	assert.Equal(t, file, loc.File)
	assert.Equal(t, leakLine, loc.Line)
	assert.Equal(t, int64(len(leaked)), top.LiveCount)
	assert.Equal(t, int64(len(leaked))*16*256*4, top.LiveBytes)
	assert.Equal(t, "github.com/tensorlife/tensorlife/pool_test.keepSmall", oom.TopSites[1].Site.Location().Function)
	assert.Equal(t, int64(4), oom.TopSites[1].LiveCount)

	text := oomErr.Error()
	t.Log(text)
	// The text alone names the function and the file:line of the leak, and
	// how much it holds; the layout is tensor.OOMError's.
	assert.Contains(t, text, "pool_test.TestOOMNamesLeakingSite")
	assert.Contains(t, text, fmt.Sprintf("%s:%d", file, leakLine))
	assert.Contains(t, text, fmt.Sprintf("%d tensors", len(leaked)))
	assert.Contains(t, text, "pool_test.keepSmall")
	assert.Contains(t, text, "budget limit 1 MiB")
	assert.Contains(t, text, "requested 16 KiB")
	assert.Less(t, strings.Index(text, "TestOOMNamesLeakingSite"), strings.Index(text, "keepSmall"), "the largest site comes first")

	assert.Equal(t, int64(1), p.Stats().OOMs)
	assert.Equal(t, int64(1), tr.Totals().Event(track.EventOOM), "the OOM is noted in the tracker once")

	for _, x := range append(leaked, small...) {
		require.NoError(t, x.Free())
	}
	require.NoError(t, p.Close())
	_, bytes := dev.Outstanding()
	assert.Zero(t, bytes)
}

func TestOOMWithoutTrackingNamesNoSites(t *testing.T) {
	dev := newFault(t, 1<<20)
	p, err := pool.New(dev, pool.Untracked())
	require.NoError(t, err)
	_, err = p.Allocate(2 << 20)
	var oom *tensor.OOMError
	require.ErrorAs(t, err, &oom)
	assert.Equal(t, "device", oom.Reason)
	assert.Empty(t, oom.TopSites)
	assert.Equal(t, int64(1<<20), oom.DeviceFree)
	require.NoError(t, p.Close())
}

// OnOutOfMemory sees every out-of-memory error the pool returns, the very
// value the caller gets, before Allocate returns it, and nothing else. The
// hook may read the pool: no lock is held while it runs.
func TestOnOutOfMemoryHearsEveryOOM(t *testing.T) {
	dev := newFault(t, 4<<20)
	tr := newTracker(t)
	var heard []*tensor.OOMError
	var reservedThen []int64
	var p *pool.Pool
	p, err := pool.New(dev, pool.Tracker(tr), pool.Budget(1<<20), pool.OnOutOfMemory(func(e *tensor.OOMError) {
		heard = append(heard, e)
		reservedThen = append(reservedThen, p.Stats().Reserved)
	}))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	ctx := context.Background()

	held, err := tensor.New(ctx, p, tensor.Float32, 128, 1024) // half the budget
	require.NoError(t, err)
	defer held.Free()
	assert.Empty(t, heard, "no error, nothing heard")

	for range 2 {
		_, err = tensor.New(ctx, p, tensor.Float32, 256, 1024) // the whole budget
		require.ErrorIs(t, err, tensor.ErrOutOfMemory)
	}
	require.Len(t, heard, 2, "one call per error")
	var oom *tensor.OOMError
	require.ErrorAs(t, err, &oom)
	assert.Same(t, oom, heard[1], "the hook gets the error the caller gets")
	assert.Equal(t, "budget", heard[0].Reason)
	assert.Equal(t, []int64{512 << 10, 512 << 10}, reservedThen, "the hook read the pool while the allocation waited")
	assert.Equal(t, int64(2), p.Stats().OOMs)
}

// TestOnOutOfMemoryPanicIsRecovered guards the host against its own hook: a
// hook that panics neither kills the process nor escapes into the
// allocating request. The allocation returns its out-of-memory error, the
// panic is counted and logged, and the next failure calls the hook again.
func TestOnOutOfMemoryPanicIsRecovered(t *testing.T) {
	dev := newFault(t, 4<<20)
	var logged bytes.Buffer
	tr, err := track.New(track.Name(t.Name()), track.Logger(slog.New(slog.NewTextHandler(&logged, nil))))
	require.NoError(t, err)
	t.Cleanup(func() { tracktest.VerifyNone(t, tr) })
	calls := 0
	p, err := pool.New(dev, pool.Tracker(tr), pool.Budget(1<<20),
		pool.OnOutOfMemory(func(*tensor.OOMError) {
			calls++
			panic("hook bug")
		}))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })

	for range 2 {
		_, err = tensor.New(context.Background(), p, tensor.Float32, 512, 1024) // twice the budget
		require.ErrorIs(t, err, tensor.ErrOutOfMemory, "the caller gets its error, not the hook's panic")
	}
	assert.Equal(t, 2, calls, "the hook is called again after a panic")
	s := p.Stats()
	assert.Equal(t, int64(2), s.CallbackPanics)
	assert.Equal(t, int64(2), s.OOMs)
	assert.Equal(t, 2, strings.Count(logged.String(), "OnOutOfMemory hook panicked"), "%s", logged.String())
	assert.Contains(t, logged.String(), "hook bug")
}
