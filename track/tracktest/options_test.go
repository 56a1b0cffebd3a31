package tracktest_test

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

// keepForever stands for a package-level cache that holds tensors on
// purpose.
//
//go:noinline
func keepForever(t *testing.T, e *env) *tensor.Tensor {
	x, err := tensor.Make(context.Background(), e.alloc, tensor.Spec{DType: tensor.Float16, Shape: tensor.Shape{32}, Kind: "kv-cache"})
	require.NoError(t, err)
	return x
}

func TestIgnoreOptions(t *testing.T) {
	tests := []struct {
		name string
		// setup makes the tensors the option should ignore, and returns
		// the option; the test then leaks one tensor it must still report.
		setup func(t *testing.T, e *env) (tracktest.Option, []*tensor.Tensor)
	}{
		{"IgnoreCurrent", func(t *testing.T, e *env) (tracktest.Option, []*tensor.Tensor) {
			before := keepForever(t, e)
			return tracktest.IgnoreCurrent(), []*tensor.Tensor{before}
		}},
		{"IgnoreSite of the allocating function", func(t *testing.T, e *env) (tracktest.Option, []*tensor.Tensor) {
			return tracktest.IgnoreSite(thisPackage + ".keepForever"), []*tensor.Tensor{keepForever(t, e), keepForever(t, e)}
		}},
		{"IgnoreSite of a caller", func(t *testing.T, e *env) (tracktest.Option, []*tensor.Tensor) {
			return tracktest.IgnoreSite(thisPackage + ".TestIgnoreOptions.func3"), []*tensor.Tensor{keepForever(t, e)}
		}},
		{"IgnoreKind", func(t *testing.T, e *env) (tracktest.Option, []*tensor.Tensor) {
			return tracktest.IgnoreKind("kv-cache"), []*tensor.Tensor{keepForever(t, e)}
		}},
		{"IgnoreLabel", func(t *testing.T, e *env) (tracktest.Option, []*tensor.Tensor) {
			ctx := track.WithLabels(context.Background(), "cache", "global")
			return tracktest.IgnoreLabel("cache", "global"), []*tensor.Tensor{e.newTensor(t, ctx, 7)}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, "ignore")
			opt, kept := tt.setup(t, e)
			require.Error(t, tracktest.Find(e.tr, fast...), "without the option the kept tensors are leaks")
			require.NoError(t, tracktest.Find(e.tr, opts(opt)...), "the option ignores them")

			leak, err := tensor.New(track.WithLabels(context.Background(), "cache", "request"), e.alloc, tensor.Int8, 3)
			require.NoError(t, err)
			err = tracktest.Find(e.tr, opts(opt)...)
			var le *tracktest.LeakError
			require.ErrorAs(t, err, &le)
			require.Len(t, le.Leaks, 1, "the option ignores no more than it says")
			assert.Equal(t, leak.ID(), le.Leaks[0].ID)

			require.NoError(t, leak.Free())
			for _, x := range kept {
				require.NoError(t, x.Free())
			}
		})
	}
}

func TestIgnoreOptionsApplyToDroppedTensors(t *testing.T) {
	tests := []struct {
		name    string
		opt     tracktest.ScopeOption
		ignored bool
	}{
		{"IgnoreSite", tracktest.IgnoreSite(thisPackage + ".dropTensor"), true},
		{"IgnoreKind", tracktest.IgnoreKind("tensor"), true},
		{"IgnoreLabel", tracktest.IgnoreLabel("cache", "global"), true},
		{"IgnoreKind of another kind", tracktest.IgnoreKind("mask"), false},
		{"IgnoreLabel of another value", tracktest.IgnoreLabel("cache", "request"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			noAutoGC(t)
			e := newEnv(t, "ignore-dropped")
			ft := newFakeT(t.Name())
			ctx := track.WithLabels(tracktest.Context(ft, e.tr, scopedOpts(tt.opt)...), "cache", "global")
			dropTensor(t, e, ctx)
			collectDropped(t, e.tr, 1, 0) // reclaimed: only the scope's watch saw it
			ft.finish()
			if tt.ignored {
				assert.Empty(t, ft.Errors())
				return
			}
			require.Len(t, ft.Errors(), 1)
			assert.Contains(t, ft.Errors()[0], "(1 handle: 0 live, 1 dropped without Free)")
		})
	}
}

func TestIgnoreCurrentBoundaryIsExact(t *testing.T) {
	e := newEnv(t, "boundary")
	// Allocations straddle the option as closely as code can place them.
	var before, after []*tensor.Tensor
	for range 50 {
		before = append(before, e.newTensor(t, context.Background(), 1))
		opt := tracktest.IgnoreCurrent()
		after = append(after, e.newTensor(t, context.Background(), 1))

		// Every handle is held: one look, without settling, is exact.
		err := tracktest.Find(e.tr, opt, tracktest.MaxRetries(0))
		var le *tracktest.LeakError
		require.ErrorAs(t, err, &le)
		require.Len(t, le.Leaks, 1)
		require.Equal(t, after[len(after)-1].ID(), le.Leaks[0].ID)
		require.NoError(t, after[len(after)-1].Free())
	}
	for _, x := range before {
		require.NoError(t, x.Free())
	}
	runtime.KeepAlive(after)
}

func TestVerifyTestMainAcceptsIgnoreCurrent(t *testing.T) {
	e := newEnv(t, "main-ignore")
	setup := e.newTensor(t, context.Background(), 1) // a package-level tensor
	opt := tracktest.IgnoreCurrent()
	code := verifyTestMain(t, e.tr, func() int { return 0 }, opt)
	assert.Equal(t, 0, code)
	require.NoError(t, setup.Free())
}

func TestOptionErrorsMatchSentinel(t *testing.T) {
	e := newEnv(t, "sentinel")
	err := tracktest.Find(e.tr, tracktest.MaxSettle(-1))
	assert.True(t, errors.Is(err, tracktest.ErrInvalidOption))
	assert.EqualError(t, err, "tracktest: invalid option: MaxSettle(-1ns): want at least 0s (passed to Find)")
}
