package gorgoniatrack_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gorgonia "gorgonia.org/tensor"

	"github.com/tensorlife/tensorlife/contrib/gorgoniatrack"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

// A request reaches gorgonia's allocations through For: a Dense made
// WithEngine(eng.For(ctx)), New's Dense under ctx and the results of
// operations on either carry ctx's labels and are its request's, so that
// one still live when the request ends has outlived it.
func TestAllocationsUnderARequestAreItsOwn(t *testing.T) {
	e := newEnv(t, 1<<20)
	defer tracktest.VerifyNone(t, e.tr)
	ctx, end := track.WithRequest(track.WithLabels(context.Background(), "model", "ranker"))

	a := gorgonia.New(gorgonia.WithShape(4), gorgonia.Of(gorgonia.Float32), gorgonia.WithEngine(e.eng.For(ctx)))
	b, err := gorgoniatrack.New(ctx, e.eng, gorgonia.Float32, 4)
	require.NoError(t, err)
	sum, err := b.Add(a)
	require.NoError(t, err)
	outside := gorgonia.New(gorgonia.WithShape(4), gorgonia.Of(gorgonia.Float32), gorgonia.WithEngine(e.eng))

	live := e.live(t)
	require.Len(t, live, 4)
	under := 0
	for _, x := range live {
		if x.MadeUnder(ctx) {
			under++
			v, _ := x.Labels.Get("model")
			assert.Equal(t, "ranker", v)
		}
	}
	assert.Equal(t, 3, under, "a, b and their sum are the request's; outside is not")

	require.NoError(t, gorgoniatrack.Free(a))
	require.NoError(t, gorgoniatrack.Free(b))
	end()
	var n int
	for _, x := range e.tr.Snapshot().Allocations {
		if x.MadeUnder(ctx) {
			n++
			assert.True(t, x.Outlived, "the sum, still live, outlived its request")
		}
	}
	assert.Equal(t, 1, n, "a and b were freed in their request")
	require.NoError(t, gorgoniatrack.Free(sum))
	require.NoError(t, gorgoniatrack.Free(outside))
}

// Memory from the pool comes back zeroed, as gorgonia's own does, though
// the pool hands out blocks that held other tensors.
func TestReusedMemoryIsZeroed(t *testing.T) {
	e := newEnv(t, 1<<20)
	defer tracktest.VerifyNone(t, e.tr)
	ctx := context.Background()
	d, err := gorgoniatrack.FromSlice(ctx, e.eng, []int64{7, 7, 7, 7})
	require.NoError(t, err)
	require.NoError(t, gorgoniatrack.Free(d))
	d, err = gorgoniatrack.New(ctx, e.eng, gorgonia.Int64, 4)
	require.NoError(t, err)
	assert.Equal(t, []int64{0, 0, 0, 0}, d.Data())
	require.NoError(t, gorgoniatrack.Free(d))
	w := gorgonia.New(gorgonia.WithShape(4), gorgonia.Of(gorgonia.Int64), gorgonia.WithEngine(e.eng))
	assert.Equal(t, []int64{0, 0, 0, 0}, w.Data())
	require.NoError(t, gorgoniatrack.Free(w))
}

// An admitted request's Denses draw from its reservation, whether made by
// New or by gorgonia through eng.For(ctx).
func TestAdmittedRequestsDensesDrawFromItsReservation(t *testing.T) {
	dev, err := tensor.NewHostDevice(1 << 20)
	require.NoError(t, err)
	tr, err := track.New()
	require.NoError(t, err)
	p, err := pool.New(dev, pool.Tracker(tr), pool.Budget(512<<10))
	require.NoError(t, err)
	eng, err := gorgoniatrack.NewEngine(p)
	require.NoError(t, err)
	defer tracktest.VerifyNone(t, tr)

	ctx, adm, err := p.Admit(track.WithLabels(context.Background(), "kind", "rank"), "rank", 64<<10)
	require.NoError(t, err)
	defer adm.End()
	left := adm.Left()
	d, err := gorgoniatrack.New(ctx, eng, gorgonia.Float32, 64, 64) // 16 KiB
	require.NoError(t, err)
	afterNew := adm.Left()
	assert.Less(t, afterNew, left, "New drew from the reservation")
	g := gorgonia.New(gorgonia.WithShape(64, 64), gorgonia.Of(gorgonia.Float32), gorgonia.WithEngine(eng.For(ctx)))
	assert.Less(t, adm.Left(), afterNew, "gorgonia's Dense drew from it too")
	require.NoError(t, gorgoniatrack.Free(d))
	require.NoError(t, gorgoniatrack.Free(g))
}
