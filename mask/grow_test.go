package mask

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/invariants"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/tensortest"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

func TestGrowableMatchesReference(t *testing.T) {
	for _, dt := range maskDTypes {
		for _, batch := range []int{1, 3, 8} {
			t.Run(fmt.Sprintf("%v/batch%d", dt, batch), func(t *testing.T) {
				e := newEnv(t)
				b := e.builder(t, DType(dt))
				g, err := b.NewGrowable(context.Background(), batch, 1)
				require.NoError(t, err)
				defer free(t, g)

				rng := rand.New(rand.NewPCG(uint64(batch), uint64(dt)))
				var tokens [][]bool
				for range 60 {
					if rng.IntN(3) == 0 {
						valid := make([]bool, batch)
						for s := range valid {
							valid[s] = rng.IntN(2) == 0
						}
						require.NoError(t, g.AppendValid(valid))
						tokens = append(tokens, valid)
					} else {
						n := rng.IntN(5)
						require.NoError(t, g.Append(n))
						for range n {
							tokens = append(tokens, []bool{true, true, true, true, true, true, true, true}[:batch])
						}
					}
					require.Equal(t, len(tokens), g.Len())
					require.GreaterOrEqual(t, g.Cap(), g.Len())

					v, err := g.View()
					require.NoError(t, err)
					assert.Equal(t, tensor.Shape{len(tokens), batch}, v.Shape())
					assert.Equal(t, refGrowable(dt, tokens), readBytes(t, v))
					free(t, v)
				}
			})
		}
	}
}

func TestGrowableDeviceAllocations(t *testing.T) {
	tests := []struct {
		hint, tokens int
		wantAllocs   int64
		wantCap      int
	}{
		{1, 4096, 13, 4096},
		{1, 4097, 14, 8192},
		{4096, 4096, 1, 4096},
		{100, 1000, 5, 1600},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("hint%d/tokens%d", tc.hint, tc.tokens), func(t *testing.T) {
			e := newEnv(t)
			b := e.builder(t)
			g, err := b.NewGrowable(context.Background(), 4, tc.hint)
			require.NoError(t, err)
			for range tc.tokens {
				require.NoError(t, g.Append(1))
			}
			assert.Equal(t, tc.wantAllocs, e.dev.allocs.Load())
			assert.Equal(t, tc.wantCap, g.Cap())
			assert.Equal(t, int64(tc.wantCap*4), g.Bytes())
			assert.Equal(t, int64(1), e.tr.Totals().LiveCount, "outgrown tensors are freed")
			free(t, g)
		})
	}
}

func TestGrowableAppendCopiesOnlyNewBytes(t *testing.T) {
	e := newEnv(t)
	b := e.builder(t, DType(tensor.Float32))
	g, err := b.NewGrowable(context.Background(), 3, 64)
	require.NoError(t, err)
	defer free(t, g)
	const rowBytes = 3 * 4

	for _, n := range []int{1, 1, 5, 20, 1} {
		before := e.dev.toDevice.Load()
		require.NoError(t, g.Append(n))
		assert.Equal(t, int64(n*rowBytes), e.dev.toDevice.Load()-before, "Append(%d)", n)
	}
	before := e.dev.toDevice.Load()
	require.NoError(t, g.AppendValid([]bool{true, false, true}))
	assert.Equal(t, int64(rowBytes), e.dev.toDevice.Load()-before)
}

func TestGrowableAppendAllocatesNothing(t *testing.T) {
	e := newEnv(t)
	b := e.builder(t, DType(tensor.Float32))
	ctx := track.WithLabels(context.Background(), "request", "r1")
	g, err := b.NewGrowable(ctx, 4, 1)
	require.NoError(t, err)
	defer free(t, g)
	require.NoError(t, g.Append(3000)) // grow once, so the runs below need not
	require.NoError(t, g.Append(1))

	valid := []bool{true, false, true, true}
	var appendErr error
	allocs := testing.AllocsPerRun(200, func() {
		if err := g.Append(1); err != nil {
			appendErr = err
		}
	})
	require.NoError(t, appendErr)
	assert.Zero(t, allocs, "Go allocations per Append")
	allocs = testing.AllocsPerRun(200, func() {
		if err := g.AppendValid(valid); err != nil {
			appendErr = err
		}
	})
	require.NoError(t, appendErr)
	assert.Zero(t, allocs, "Go allocations per AppendValid")
}

func TestGrowableBadInput(t *testing.T) {
	e := newEnv(t)
	e.checks = append(e.checks, tracktest.AllowMisuse()) // it frees twice on purpose
	b := e.builder(t, MaxLength(10))
	ctx := context.Background()

	t.Run("no batch", func(t *testing.T) {
		_, err := b.NewGrowable(ctx, 0, 4)
		assert.ErrorIs(t, err, ErrEmptyBatch)
	})
	t.Run("no capacity", func(t *testing.T) {
		_, err := b.NewGrowable(ctx, 2, 0)
		assert.ErrorIs(t, err, ErrInvalidLength)
	})
	t.Run("huge batch", func(t *testing.T) {
		_, err := b.NewGrowable(ctx, 1<<62, 1)
		assert.ErrorIs(t, err, ErrCapacity)
	})

	g, err := b.NewGrowable(ctx, 2, 4)
	require.NoError(t, err)
	require.NoError(t, g.Append(9))
	want := readView(t, g)

	tests := []struct {
		name string
		do   func() error
		want error
	}{
		{"negative count", func() error { return g.Append(-1) }, ErrInvalidLength},
		{"past max length", func() error { return g.Append(2) }, ErrCapacity},
		{"valid for the wrong batch", func() error { return g.AppendValid([]bool{true}) }, ErrShapeMismatch},
		{"valid for a larger batch", func() error { return g.AppendValid([]bool{true, true, true}) }, ErrShapeMismatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.ErrorIs(t, tc.do(), tc.want)
			assert.Equal(t, 9, g.Len(), "the mask is unchanged")
			assert.Equal(t, want, readView(t, g))
		})
	}
	t.Run("up to max length", func(t *testing.T) {
		require.NoError(t, g.Append(1))
		assert.Equal(t, 10, g.Cap(), "growth stops at MaxLength")
		assert.ErrorIs(t, g.Append(1), ErrCapacity)
		assert.ErrorIs(t, g.AppendValid([]bool{true, false}), ErrCapacity)
	})
	t.Run("freed", func(t *testing.T) {
		require.NoError(t, g.Free())
		assert.True(t, g.Freed())
		assert.ErrorIs(t, g.Append(1), tensor.ErrFreed)
		assert.ErrorIs(t, g.AppendValid([]bool{true, true}), tensor.ErrFreed)
		_, err := g.View()
		assert.ErrorIs(t, err, tensor.ErrFreed)
		err, panicked := invariants.Recover(g.Free)
		assert.ErrorIs(t, err, tensor.ErrDoubleFree)
		assert.Equal(t, invariants.Enabled, panicked)
	})
}

func readView(t *testing.T, g *Growable) []byte {
	t.Helper()
	v, err := g.View()
	require.NoError(t, err)
	defer free(t, v)
	return readBytes(t, v)
}

func TestGrowableGrowthFailureLosesNothing(t *testing.T) {
	host, err := tensor.NewHostDevice(1 << 20)
	require.NoError(t, err)
	dev, err := tensortest.NewFaulty(host, tensortest.FailNth(2)) // the first growth
	require.NoError(t, err)
	e := newEnv(t)
	alloc, err := tensor.NewDeviceAllocator(dev, e.tr)
	require.NoError(t, err)
	b, err := NewBuilder(alloc)
	require.NoError(t, err)

	g, err := b.NewGrowable(context.Background(), 2, 2)
	require.NoError(t, err)
	require.NoError(t, g.AppendValid([]bool{true, false}))
	require.NoError(t, g.AppendValid([]bool{false, true}))

	err = g.Append(1)
	require.ErrorIs(t, err, tensor.ErrOutOfMemory)
	assert.Equal(t, 2, g.Len())
	assert.Equal(t, 2, g.Cap())
	assert.Equal(t, refGrowable(tensor.Bool, [][]bool{{true, false}, {false, true}}), readView(t, g))

	require.NoError(t, g.Append(1), "the next growth succeeds")
	assert.Equal(t, refGrowable(tensor.Bool, [][]bool{{true, false}, {false, true}, {true, true}}), readView(t, g))
	free(t, g)
	bytes, blocks := dev.Outstanding()
	assert.Zero(t, bytes)
	assert.Zero(t, blocks)
}

func TestGrowableGrowthCopyFailure(t *testing.T) {
	e := newEnv(t)
	b := e.builder(t)
	g, err := b.NewGrowable(context.Background(), 1, 1)
	require.NoError(t, err)
	require.NoError(t, g.Append(1))
	e.dev.failCopiesAfter.Store(e.dev.toDeviceCalls.Load()) // the growth's copy fails
	assert.ErrorIs(t, g.Append(1), errCopy)
	assert.Equal(t, 1, g.Len())
	assert.Equal(t, int64(1), e.tr.Totals().LiveCount, "the new tensor was freed")
	e.dev.failCopiesAfter.Store(0)
	require.NoError(t, g.Append(1))
	free(t, g)
}

func TestGrowableViewOutlivesGrowth(t *testing.T) {
	e := newEnv(t)
	b := e.builder(t)
	g, err := b.NewGrowable(context.Background(), 1, 2)
	require.NoError(t, err)
	require.NoError(t, g.Append(2))
	old, err := g.View()
	require.NoError(t, err)

	require.NoError(t, g.AppendValid([]bool{false})) // grows: the old tensor is freed by g
	assert.Equal(t, int64(2), e.dev.live(), "the view keeps the old memory")
	assert.Equal(t, []byte{1, 1}, readBytes(t, old))
	assert.Equal(t, []byte{1, 1, 0}, readView(t, g))

	free(t, old)
	assert.Equal(t, int64(1), e.dev.live())
	free(t, g)
}

func TestGrowableGrowthCarriesLabels(t *testing.T) {
	e := newEnv(t)
	b := e.builder(t)
	ctx, cancel := context.WithCancel(track.WithLabels(context.Background(), "request", "r7"))
	g, err := b.NewGrowable(ctx, 1, 1)
	require.NoError(t, err)
	cancel() // the mask keeps no request context, only its labels
	require.NoError(t, g.Append(5))

	snap := e.tr.Snapshot()
	require.Len(t, snap.Allocations, 1)
	a := snap.Allocations[0]
	assert.True(t, track.NewLabels("request", "r7").Equal(a.Labels), "labels %v", a.Labels)
	assert.Equal(t, Kind, a.Kind)
	assert.Equal(t, []int{8, 1}, a.Shape)
	free(t, g)
}
