package tensor_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/invariants"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// deferFree frees x when it returns, by a deferred call: the compiler runs
// it through a wrapper closure (deferFree.deferwrap1), a real frame that
// runtime.Callers leaves out and a frame-pointer walk sees.
//
//go:noinline
func deferFree(x *tensor.Tensor) {
	defer x.Free()
}

// deferFreeInLoop frees x when it returns, by a deferred call in a loop:
// not open-coded, it runs from runtime.deferreturn, another frame that
// runtime.Callers leaves out.
//
//go:noinline
func deferFreeInLoop(x *tensor.Tensor) {
	for _, x := range []*tensor.Tensor{x} {
		defer x.Free()
	}
}

// firstFreeByDefer makes a tensor, frees it with free, frees it again, and
// returns the first free's site from the double-free error.
func firstFreeByDefer(t *testing.T, free func(*tensor.Tensor), opts ...track.Option) *track.Site {
	t.Helper()
	_, _, alloc := setupUnchecked(t, 1<<20, opts...)
	x, err := tensor.New(context.Background(), alloc, tensor.Uint8, 8)
	require.NoError(t, err)
	free(x)
	err, _ = invariants.Recover(func() error { return x.Free() })
	var dfe *tensor.DoubleFreeError
	require.ErrorAs(t, err, &dfe)
	require.NotNil(t, dfe.FirstFree)
	return dfe.FirstFree
}

func TestFirstFreeByDeferIsTheSameWithEitherCapture(t *testing.T) {
	for _, c := range []struct {
		name string
		free func(*tensor.Tensor)
	}{
		{"tensor_test.deferFree", deferFree},
		{"tensor_test.deferFreeInLoop", deferFreeInLoop},
	} {
		t.Run(c.name, func(t *testing.T) {
			walked := firstFreeByDefer(t, c.free, track.FramePointers(true))
			callers := firstFreeByDefer(t, c.free, track.FramePointers(false))

			frames := walked.Frames()
			require.Len(t, frames, 2, "Free keeps two frames of its caller's stack")
			assert.Equal(t, "github.com/tensorlife/tensorlife/"+c.name, frames[0].Function,
				"the first frame is the function whose deferred call freed, not a wrapper")
			assert.Equal(t, "github.com/tensorlife/tensorlife/tensor_test.firstFreeByDefer", frames[1].Function,
				"the second frame is that function's caller")
			assert.Equal(t, callers.Frames(), frames, "a walk names the frames runtime.Callers does")
			assert.Equal(t, callers.PCs(), walked.PCs())
		})
	}
}
