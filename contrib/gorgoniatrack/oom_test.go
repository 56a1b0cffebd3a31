package gorgoniatrack_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gorgonia "gorgonia.org/tensor"

	"github.com/tensorlife/tensorlife/contrib/gorgoniatrack"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

// With the budget spent, New returns the pool's out-of-memory error, which
// names the line holding the memory, and no Dense; gorgonia alone panics
// with that same error, which a caller can recover and match.
func TestSpentBudgetIsAnErrorFromNewAndAPanicFromGorgonia(t *testing.T) {
	dev, err := tensor.NewHostDevice(1 << 20)
	require.NoError(t, err)
	e := newEnv(t, 1<<20)
	p, err := pool.New(dev, pool.Tracker(e.tr), pool.Budget(64<<10))
	require.NoError(t, err)
	eng, err := gorgoniatrack.NewEngine(p)
	require.NoError(t, err)
	defer tracktest.VerifyNone(t, e.tr)
	ctx := context.Background()

	file, line := here()
	hog, err := gorgoniatrack.New(ctx, eng, gorgonia.Float32, 128, 100) // 50 KiB of the 64
	require.NoError(t, err)

	d, err := gorgoniatrack.New(ctx, eng, gorgonia.Float32, 128, 100)
	assert.Nil(t, d)
	require.ErrorIs(t, err, tensor.ErrOutOfMemory)
	var oom *tensor.OOMError
	require.ErrorAs(t, err, &oom)
	assert.Equal(t, "budget", oom.Reason)
	require.NotEmpty(t, oom.TopSites)
	top := oom.TopSites[0].Site.Location()
	assert.Equal(t, file, top.File)
	assert.Equal(t, line+1, top.Line, "the error names the line holding the memory: %s", top)
	_, err = gorgoniatrack.FromSlice(ctx, eng, make([]float64, 4<<10))
	assert.ErrorIs(t, err, tensor.ErrOutOfMemory)

	panicked := func() (v any) {
		defer func() { v = recover() }()
		gorgonia.New(gorgonia.WithShape(128, 100), gorgonia.Of(gorgonia.Float32), gorgonia.WithEngine(eng))
		return nil
	}()
	require.NotNil(t, panicked, "gorgonia's makeArray panics on a failed Alloc")
	perr, ok := panicked.(error)
	require.True(t, ok, "the panic value is the allocator's error: %v", panicked)
	assert.True(t, errors.As(perr, &oom))

	require.NoError(t, gorgoniatrack.Free(hog))
	d, err = gorgoniatrack.New(ctx, eng, gorgonia.Float32, 128, 100)
	require.NoError(t, err, "the freed memory is the budget's again")
	require.NoError(t, gorgoniatrack.Free(d))
}
