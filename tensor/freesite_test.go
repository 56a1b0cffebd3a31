package tensor_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/fpstack"
	"github.com/tensorlife/tensorlife/internal/invariants"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// deferLines holds the line of each defer statement below, by function.
var deferLines = map[string]int{}

// deferLine records the line after the caller's: that of its defer.
func deferLine(name string) {
	_, _, line, _ := runtime.Caller(1)
	deferLines[name] = line + 1
}

// deferFree frees x when it returns, by a deferred call: the compiler runs
// it through a wrapper closure (deferFree.deferwrap1), a real frame that
// runtime.Callers leaves out and a frame-pointer walk sees, at the line of
// the defer statement.
//
//go:noinline
func deferFree(x *tensor.Tensor) {
	deferLine("deferFree")
	defer x.Free()
	runtime.Gosched() // the function returns on another line than its defer's
}

// deferFreeInLoop frees x when it returns, by a deferred call in a loop:
// not open-coded, it runs from runtime.deferreturn, another frame that
// runtime.Callers leaves out.
//
//go:noinline
func deferFreeInLoop(x *tensor.Tensor) {
	for _, x := range []*tensor.Tensor{x} {
		deferLine("deferFreeInLoop")
		defer x.Free()
	}
	runtime.Gosched()
}

// deferFreePanicking frees x from a deferred call while a panic unwinds:
// runtime.gopanic runs it.
//
//go:noinline
func deferFreePanicking(x *tensor.Tensor) {
	defer func() { _ = recover() }()
	deferLine("deferFreePanicking")
	defer x.Free()
	panic("unwinding")
}

// freeDirectly is the control: a Free that is not deferred.
//
//go:noinline
func freeDirectly(x *tensor.Tensor) { _ = x.Free() }

// doubleFreeAfter makes a tensor, frees it with free, frees it again, and
// returns the double-free error.
func doubleFreeAfter(t *testing.T, free func(*tensor.Tensor), opts ...track.Option) *tensor.DoubleFreeError {
	t.Helper()
	_, _, alloc := setupUnchecked(t, 1<<20, opts...)
	x, err := tensor.New(context.Background(), alloc, tensor.Uint8, 8)
	require.NoError(t, err)
	free(x)
	err, _ = invariants.Recover(func() error { return x.Free() })
	var dfe *tensor.DoubleFreeError
	require.ErrorAs(t, err, &dfe)
	require.NotNil(t, dfe.FirstFree)
	return dfe
}

// A deferred Free is named at its defer statement, as deferred, in a
// double-free report: the return line a plain capture names is not the line
// to change.
func TestDeferredFreeIsNamedAtItsDeferStatement(t *testing.T) {
	if !fpstack.Enabled() {
		t.Skip("a deferred Free is told apart by a frame-pointer walk, which is off")
	}
	for _, c := range []struct {
		name string
		free func(*tensor.Tensor)
	}{
		{"deferFree", deferFree},
		{"deferFreeInLoop", deferFreeInLoop},
		{"deferFreePanicking", deferFreePanicking},
	} {
		t.Run(c.name, func(t *testing.T) {
			dfe := doubleFreeAfter(t, c.free)
			assert.True(t, dfe.FirstDeferred)
			assert.False(t, dfe.SecondDeferred, "the second Free is called directly")
			frames := dfe.FirstFree.Frames()
			require.Len(t, frames, 2, "two frames name a Free")
			assert.Equal(t, "github.com/tensorlife/tensorlife/tensor_test."+c.name, frames[0].Function,
				"named by the function that deferred it, not its wrapper")
			assert.Equal(t, deferLines[c.name], frames[0].Line, "at the defer statement")
			assert.Equal(t, "github.com/tensorlife/tensorlife/tensor_test.doubleFreeAfter", frames[1].Function,
				"then that function's caller")
			assert.Contains(t, dfe.Error(), fmt.Sprintf("first freed by a deferred Free at github.com/tensorlife/tensorlife/tensor_test.%s (%s:%d)",
				c.name, frames[0].File, deferLines[c.name]))
		})
	}
	t.Run("not deferred", func(t *testing.T) {
		dfe := doubleFreeAfter(t, freeDirectly)
		assert.False(t, dfe.FirstDeferred)
		assert.Equal(t, "github.com/tensorlife/tensorlife/tensor_test.freeDirectly", dfe.FirstFree.Location().Function)
		assert.NotContains(t, dfe.Error(), "deferred")
	})
}

// With runtime.Callers alone, which leaves the defer statement's closure
// out, a deferred Free is named at the line its function returned at, as a
// plain Free of that function.
func TestDeferredFreeWithCallersAloneNamesTheFunction(t *testing.T) {
	dfe := doubleFreeAfter(t, deferFree, track.FramePointers(false))
	assert.False(t, dfe.FirstDeferred)
	frames := dfe.FirstFree.Frames()
	require.Len(t, frames, 2)
	assert.Equal(t, "github.com/tensorlife/tensorlife/tensor_test.deferFree", frames[0].Function)
	assert.Equal(t, "github.com/tensorlife/tensorlife/tensor_test.doubleFreeAfter", frames[1].Function)
}

// A second Free that is deferred is said so too, at its defer statement.
func TestSecondDeferredFreeIsSaidDeferred(t *testing.T) {
	if !fpstack.Enabled() {
		t.Skip("frame-pointer capture is off")
	}
	_, tr, alloc := setupUnchecked(t, 1<<20)
	x, err := tensor.New(context.Background(), alloc, tensor.Uint8, 8)
	require.NoError(t, err)
	require.NoError(t, x.Free())
	func() {
		defer func() { _ = recover() }() // built with invariants, a double free panics
		deferLine("second")
		defer x.Free()
	}()
	ms, _, _ := tr.Books().MisuseSince(0)
	require.Len(t, ms, 1)
	assert.False(t, ms[0].FirstDeferred)
	assert.True(t, ms[0].SecondDeferred)
	require.NotNil(t, ms[0].SecondFree)
	assert.Equal(t, deferLines["second"], ms[0].SecondFree.Location().Line)
}
