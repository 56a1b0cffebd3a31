package gomlxtrack_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/contrib/gomlxtrack"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

func TestExecOutputsAreTrackedAtTheExecLine(t *testing.T) {
	tr := newTracker(t)
	defer tracktest.VerifyNone(t, tr)
	b := newBackend(t, tr)
	e := addExec(t, b)
	defer e.Finalize()

	ctx, end := track.WithRequest(track.WithLabels(context.Background(), "model", "add"))
	outs := exec(t, ctx, e, matrix(64, 1), matrix(64, 2))
	require.Len(t, outs, 1)
	assert.Equal(t, float32(3), outs[0].Value().([][]float32)[63][63])

	got := allocations(tr, gomlxtrack.KindBuffer)
	require.Len(t, got, 1, "the output alone: the Go values' buffers went to the program")
	a := got[0]
	assert.EqualValues(t, 64*64*4, a.Bytes)
	assert.Equal(t, "float32", a.DType)
	assert.Equal(t, []int{64, 64}, a.Shape)
	assert.Equal(t, "go:0", a.Device)
	assert.Equal(t, testPkg+"exec", a.Site.Location().Function, "the line that called Exec")
	assert.True(t, a.InFlight, "the request's tensor while it is open")
	model, _ := a.Labels.Get("model")
	assert.Equal(t, "add", model)
	end()
	assert.True(t, allocations(tr, gomlxtrack.KindBuffer)[0].Outlived, "still live when its request ended")

	finalizeAll(t, outs)
	assert.Empty(t, allocations(tr, gomlxtrack.KindBuffer))
}

// materialize puts a tensor of v on b's device, as GoMLX does for a local
// tensor passed to a program: the line sites name.
//
//go:noinline
func materialize(t *testing.T, b backends.Backend, v any, share bool) *tensors.Tensor {
	t.Helper()
	x := tensors.FromAnyValue(v)
	require.NoError(t, x.MaterializeOnDevice(b, share, 0))
	return x
}

func TestEveryBufferIsTrackedAtItsRealSize(t *testing.T) {
	tr := newTracker(t)
	defer tracktest.VerifyNone(t, tr)
	b := newBackend(t, tr)

	for _, tc := range []struct {
		name  string
		value any
		share bool
		bytes int64
		dtype string
		shape []int
	}{
		{"flat data", matrix(64, 1), false, 64 * 64 * 4, "float32", []int{64, 64}},
		{"shared buffer", matrix(64, 1), true, 64 * 64 * 4, "float32", []int{64, 64}},
		{"int8", [][]int8{{1, 2, 3, 4, 5}, {1, 2, 3, 4, 5}, {1, 2, 3, 4, 5}}, false, 15, "int8", []int{3, 5}},
		{"scalar", float64(2), false, 8, "float64", []int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := materialize(t, b, tc.value, tc.share)
			got := allocations(tr, gomlxtrack.KindBuffer)
			require.Len(t, got, 1)
			assert.Equal(t, tc.bytes, got[0].Bytes)
			assert.Equal(t, tc.dtype, got[0].DType)
			assert.Equal(t, len(tc.shape), len(got[0].Shape))
			assert.Equal(t, testPkg+"materialize", got[0].Site.Location().Function)
			assert.False(t, got[0].InFlight, "made outside Exec: no request")

			require.NoError(t, x.FinalizeAll())
			assert.Empty(t, allocations(tr, gomlxtrack.KindBuffer), "BufferFinalize frees")
		})
	}
}

func TestLocalTensorArgumentsAreBookedUnderTheRequest(t *testing.T) {
	tr := newTracker(t)
	defer tracktest.VerifyNone(t, tr)
	b := newBackend(t, tr)
	e := addExec(t, b)
	defer e.Finalize()

	x := tensors.FromValue(matrix(64, 1))
	ctx, end := track.WithRequest(context.Background())
	outs := exec(t, ctx, e, x, x)
	got := allocations(tr, gomlxtrack.KindBuffer)
	require.Len(t, got, 2, "the output and the local tensor's device copy, which stays with it")
	for _, a := range got {
		assert.Equal(t, testPkg+"exec", a.Site.Location().Function)
		assert.True(t, a.InFlight)
	}
	end()
	finalizeAll(t, outs)
	require.NoError(t, x.FinalizeAll())
}

func TestForeignBuffersAreTypedErrors(t *testing.T) {
	tr := newTracker(t)
	inner, err := simplego.New("")
	require.NoError(t, err)
	b := gomlxtrack.Wrap(inner, tr)
	other := newBackend(t, tr)
	shape := shapes.Make(dtypes.Float32, 2)

	raw, err := inner.BufferFromFlatData(0, []float32{1, 2}, shape)
	require.NoError(t, err)
	defer func() { require.NoError(t, inner.BufferFinalize(raw)) }()
	theirs, err := other.BufferFromFlatData(0, []float32{1, 2}, shape)
	require.NoError(t, err)
	defer func() { require.NoError(t, other.BufferFinalize(theirs)) }()

	for name, buf := range map[string]backends.Buffer{"the wrapped backend's": raw, "another wrapped backend's": theirs, "nil": nil} {
		t.Run(name, func(t *testing.T) {
			calls := map[string]func() error{
				"BufferFinalize":   func() error { return b.BufferFinalize(buf) },
				"BufferShape":      func() error { _, err := b.BufferShape(buf); return err },
				"BufferDeviceNum":  func() error { _, err := b.BufferDeviceNum(buf); return err },
				"BufferToFlatData": func() error { return b.BufferToFlatData(buf, make([]float32, 2)) },
				"BufferData":       func() error { _, err := b.BufferData(buf); return err },
				"BufferCopyToDevice": func() error {
					_, err := b.BufferCopyToDevice(buf, 0)
					return err
				},
			}
			for method, call := range calls {
				err := call()
				var fe *gomlxtrack.ForeignBufferError
				require.True(t, errors.As(err, &fe), "%s: %v", method, err)
				assert.ErrorIs(t, err, gomlxtrack.ErrForeignBuffer)
				assert.Equal(t, method, fe.Method)
				assert.Equal(t, "go", fe.Backend)
			}
		})
	}

	e := addExec(t, b)
	defer e.Finalize()
	donated, err := graph.DonateTensorBuffer(tensors.FromValue([]float32{1, 2}), other, 0)
	require.NoError(t, err)
	_, err = gomlxtrack.Exec(context.Background(), e, donated, []float32{1, 2})
	assert.ErrorIs(t, err, gomlxtrack.ErrForeignBuffer, "a program given another backend's buffer")
	assert.EqualValues(t, 0, tr.Totals().Misuse)
	_, err = gomlxtrack.Exec(context.Background(), nil, []float32{1, 2})
	assert.ErrorIs(t, err, gomlxtrack.ErrNilExec, "no program, no panic")
}

func TestDoubleFinalizeIsAnErrorAndAMisuse(t *testing.T) {
	tr := newTracker(t)
	b := newBackend(t, tr)
	buf, err := b.BufferFromFlatData(0, []float32{1, 2}, shapes.Make(dtypes.Float32, 2))
	require.NoError(t, err)
	require.NoError(t, b.BufferFinalize(buf))
	err = b.BufferFinalize(buf)
	assert.ErrorIs(t, err, gomlxtrack.ErrFinalized)
	assert.EqualValues(t, 1, tr.Totals().Misuse)
	ms, _, _ := tr.Books().MisuseSince(0)
	require.Len(t, ms, 1)
	assert.Equal(t, track.EventDoubleFree, ms[0].Kind)
	assert.EqualValues(t, 8, ms[0].Bytes)

	_, err = b.BufferData(buf)
	assert.ErrorIs(t, err, gomlxtrack.ErrFinalized, "a use after finalize")
}

func TestBackendFinalizeReleasesWhatItFrees(t *testing.T) {
	tr := newTracker(t)
	defer tracktest.VerifyNone(t, tr)
	b := newBackend(t, tr)
	e := addExec(t, b)
	outs := exec(t, context.Background(), e, matrix(4, 1), matrix(4, 2))
	require.NotEmpty(t, allocations(tr, gomlxtrack.KindProgram))
	b.Finalize()
	assert.Empty(t, allocations(tr, gomlxtrack.KindBuffer))
	assert.Empty(t, allocations(tr, gomlxtrack.KindProgram))
	finalizeAll(t, outs) // GoMLX skips the finalized backend
	e.Finalize()
	assert.EqualValues(t, 0, tr.Totals().Misuse)
}

func TestWrapIsIdempotentPerTracker(t *testing.T) {
	tr, tr2 := newTracker(t), newTracker(t)
	b := newBackend(t, tr)
	assert.Same(t, b, gomlxtrack.Wrap(b, tr))
	b2 := gomlxtrack.Wrap(b, tr2)
	assert.NotSame(t, b, b2)
	assert.Nil(t, gomlxtrack.Wrap(nil, tr))
	inner, err := simplego.New("")
	require.NoError(t, err)
	assert.Same(t, inner, gomlxtrack.Wrap(inner, nil), "a nil tracker: untracked")
}

func TestInstallWrapsTheRegisteredBackends(t *testing.T) {
	t.Cleanup(func() { backends.Register(simplego.BackendName, simplego.New) })
	assert.ErrorIs(t, gomlxtrack.Install(nil), track.ErrNilTracker)

	tr, tr2 := newTracker(t), newTracker(t)
	require.NoError(t, gomlxtrack.Install(tr))
	b, err := backends.NewWithConfig("go")
	require.NoError(t, err)
	x := materialize(t, b, []float32{1, 2, 3}, false)
	assert.Len(t, allocations(tr, gomlxtrack.KindBuffer), 1, "NewWithConfig(\"go\") is tracked")
	require.NoError(t, x.FinalizeAll())

	require.NoError(t, gomlxtrack.Install(tr2), "a second Install wraps GoMLX's own constructor again")
	for _, mk := range []func() (backends.Backend, error){
		func() (backends.Backend, error) { return backends.NewWithConfig("go") },
		backends.New,
	} {
		b2, err := mk()
		require.NoError(t, err)
		x := materialize(t, b2, []float32{1, 2, 3}, false)
		assert.Len(t, allocations(tr2, gomlxtrack.KindBuffer), 1)
		assert.Empty(t, allocations(tr, gomlxtrack.KindBuffer), "never wrapped twice: the first tracker sees nothing")
		require.NoError(t, x.FinalizeAll())
	}
}

// allocations are the live allocations of kind in tr.
func allocations(tr *track.Tracker, kind string) []track.Allocation {
	var out []track.Allocation
	for _, a := range tr.Snapshot().Allocations {
		if a.Kind == kind {
			out = append(out, a)
		}
	}
	return out
}

func TestInstallNamesTheBackendsItCannotWrap(t *testing.T) {
	t.Cleanup(func() { backends.Register(simplego.BackendName, simplego.New) })
	tr := newTracker(t)
	fake := func(config string) (backends.Backend, error) { return simplego.New(config) }
	// A name of this run's own: GoMLX's registry is the process's, and
	// keeps what -count's earlier runs registered.
	name := fmt.Sprintf("gomlxtrack-test-%d", installRuns.Add(1))
	backends.Register(name, fake)
	t.Cleanup(func() { gomlxtrack.Know(name, fake) }) // so that other tests' Install succeeds

	err := gomlxtrack.Install(tr)
	assert.ErrorIs(t, err, gomlxtrack.ErrUnknownBackend)
	assert.ErrorContains(t, err, fmt.Sprintf("%q", name))
	b, err := backends.NewWithConfig("go")
	require.NoError(t, err)
	x := materialize(t, b, []float32{1}, false)
	assert.Len(t, allocations(tr, gomlxtrack.KindBuffer), 1, "the known ones are wrapped all the same")
	require.NoError(t, x.FinalizeAll())

	gomlxtrack.Know(name, fake)
	require.NoError(t, gomlxtrack.Install(tr))
	b, err = backends.NewWithConfig(name)
	require.NoError(t, err)
	x = materialize(t, b, []float32{1}, false)
	assert.Len(t, allocations(tr, gomlxtrack.KindBuffer), 1, "known now, so wrapped")
	require.NoError(t, x.FinalizeAll())
}

// installRuns numbers the runs of the test above.
var installRuns atomic.Int64
