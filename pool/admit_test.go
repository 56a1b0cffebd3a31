package pool_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/tensortest"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

// newKindPool returns a pool of budget bytes over a tracker that keeps
// request costs by route.
func newKindPool(t *testing.T, budget int64) (*pool.Pool, *track.Tracker, *tensortest.Faulty) {
	t.Helper()
	tr, err := track.New(track.Name(t.Name()), track.RequestKinds("route"))
	require.NoError(t, err)
	t.Cleanup(func() { tracktest.VerifyNone(t, tr) })
	dev := newFault(t, 4*budget)
	p, err := pool.New(dev, pool.Tracker(tr), pool.Budget(budget))
	require.NoError(t, err)
	return p, tr, dev
}

// runRequest runs one request of route that holds bytes at its peak.
func runRequest(t *testing.T, p *pool.Pool, route string, bytes int) {
	t.Helper()
	ctx, end := track.WithRequest(context.Background())
	ctx = track.WithLabels(ctx, "route", route)
	x, err := tensor.New(ctx, p, tensor.Uint8, bytes)
	require.NoError(t, err)
	require.NoError(t, x.Free())
	end()
}

// A kind without history is admitted with the stated fallback, and says
// so; with AdmitHistory requests ended, with its p99 peak in the pool's
// rounded bytes.
func TestAdmitReservesFallbackThenPeak(t *testing.T) {
	p, tr, _ := newKindPool(t, 16<<20)
	kind := tr.KindOf(track.NewLabels("route", "/gen"))
	require.Equal(t, "route=/gen", kind)

	ctx, a, err := p.Admit(context.Background(), kind, 3<<20)
	require.NoError(t, err)
	assert.True(t, a.Fallback)
	assert.EqualValues(t, 3<<20, a.Reserved)
	assert.EqualValues(t, 3<<20, p.Stats().Promised)
	_, left := p.Headroom()
	assert.EqualValues(t, 13<<20, left, "the reservation is out of the headroom")
	_ = ctx
	a.End()
	a.End() // idempotent
	assert.Zero(t, p.Stats().Promised)

	for range pool.AdmitHistory {
		runRequest(t, p, "/gen", 1000<<10) // 1000 KiB: the pool rounds it to 1 MiB
	}
	_, a, err = p.Admit(context.Background(), kind, 3<<20)
	require.NoError(t, err)
	defer a.End()
	assert.False(t, a.Fallback)
	assert.EqualValues(t, pool.AdmitHistory, a.Requests)
	assert.EqualValues(t, 1<<20, a.Reserved, "the p99 peak, rounded as the pool rounds a block")
}

// Admitted requests draw from their reservations: a request that is not
// admitted cannot take the memory an admitted one was promised, and the
// admitted one's allocation within its reservation succeeds.
func TestAdmittedRequestDrawsFromReservation(t *testing.T) {
	p, _, _ := newKindPool(t, 8<<20)
	ctx, a, err := p.Admit(context.Background(), "route=/gen", 6<<20)
	require.NoError(t, err)
	defer a.End()

	_, err = tensor.New(context.Background(), p, tensor.Uint8, 4<<20)
	require.ErrorIs(t, err, tensor.ErrOutOfMemory, "an unadmitted request takes no promised bytes")
	var oom *tensor.OOMError
	require.ErrorAs(t, err, &oom)
	assert.EqualValues(t, 6<<20, oom.Promised)
	assert.EqualValues(t, 1, oom.Admissions)
	assert.Contains(t, err.Error(), "\n  admissions          6 MiB reserved for 1 admitted requests, not yet drawn\n")

	x, err := tensor.New(ctx, p, tensor.Uint8, 4<<20)
	require.NoError(t, err)
	assert.EqualValues(t, 2<<20, a.Left())
	s := p.Stats()
	assert.EqualValues(t, 2<<20, s.Promised)
	assert.LessOrEqual(t, s.Reserved+s.Promised, s.Limit)

	// Freed while the request is open, the block's bytes are its own
	// again: a request that grows its KV cache by reallocating keeps its
	// reservation.
	require.NoError(t, x.Free())
	assert.EqualValues(t, 6<<20, a.Left())
	y, err := tensor.New(ctx, p, tensor.Uint8, 4<<20) // a cache hit
	require.NoError(t, err)
	assert.EqualValues(t, 2<<20, a.Left())
	a.End()
	assert.Zero(t, p.Stats().Promised)
	require.NoError(t, y.Free())
	s = p.Stats()
	assert.Zero(t, s.Promised)
	assert.Zero(t, s.Admissions)
	assert.Equal(t, s.Reserved, s.Cached)
}

// A burst admitted at once sees the reservations admitted before it: the
// fifth of 4-MiB requests on a 16-MiB budget is refused with the kind, its
// reservation and the headroom.
func TestAdmitRefusesBurstPastBudget(t *testing.T) {
	p, _, _ := newKindPool(t, 16<<20)
	var cancels []context.CancelFunc
	for range 4 {
		ctx, cancel := context.WithCancel(context.Background())
		cancels = append(cancels, cancel)
		_, a, err := p.Admit(ctx, "route=/gen", 4<<20)
		require.NoError(t, err)
		cancels = append(cancels, a.End)
	}
	_, a, err := p.Admit(context.Background(), "route=/gen", 4<<20)
	require.ErrorIs(t, err, pool.ErrAdmissionRefused)
	assert.Nil(t, a)
	var ae *pool.AdmissionError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, "route=/gen", ae.Kind)
	assert.EqualValues(t, 4<<20, ae.Peak)
	assert.True(t, ae.Fallback)
	assert.Zero(t, ae.Headroom)
	assert.EqualValues(t, 4, ae.Open)
	assert.Contains(t, err.Error(), `kind "route=/gen" needs its fallback reservation (too little history) of 4 MiB, headroom 0 B`)

	for _, c := range cancels {
		c()
	}
}

// The cache is returned to the device when it is what stands in the way
// of an admission.
func TestAdmitReturnsCacheThatIsInTheWay(t *testing.T) {
	p, _, _ := newKindPool(t, 8<<20)
	x, err := tensor.New(context.Background(), p, tensor.Uint8, 6<<20)
	require.NoError(t, err)
	require.NoError(t, x.Free())
	require.EqualValues(t, 6<<20, p.Stats().Cached)
	_, a, err := p.Admit(context.Background(), "route=/gen", 4<<20)
	require.NoError(t, err)
	defer a.End()
	assert.Zero(t, p.Stats().Cached)
}

func TestAdmitErrors(t *testing.T) {
	p, _, _ := newKindPool(t, 8<<20)
	_, _, err := p.Admit(context.Background(), "k", -1)
	assert.ErrorIs(t, err, tensor.ErrInvalidSize)
	_, _, err = p.Admit(context.Background(), "k", 16<<20)
	assert.ErrorIs(t, err, pool.ErrAdmissionRefused)

	for _, units := range []int64{0, -1} {
		_, a, err := p.AdmitSized(context.Background(), "k", units, 1)
		assert.ErrorIs(t, err, tensor.ErrInvalidSize, "%d units", units)
		assert.Nil(t, a)
	}
	_, _, err = p.AdmitSized(context.Background(), "k", 1, -1)
	assert.ErrorIs(t, err, tensor.ErrInvalidSize)
	_, _, err = p.AdmitSized(context.Background(), "k", 1, 16<<20)
	assert.ErrorIs(t, err, pool.ErrAdmissionRefused)

	unbounded := newPool(t, newFault(t, 8<<20))
	_, _, err = unbounded.Admit(context.Background(), "k", 1)
	assert.ErrorIs(t, err, pool.ErrNoBudget)
	_, _, err = unbounded.AdmitSized(context.Background(), "k", 1, 1)
	assert.ErrorIs(t, err, pool.ErrNoBudget)

	require.NoError(t, p.Close())
	_, _, err = p.Admit(context.Background(), "k", 1)
	assert.ErrorIs(t, err, tensor.ErrClosed)
	_, _, err = p.AdmitSized(context.Background(), "k", 1, 1)
	assert.ErrorIs(t, err, tensor.ErrClosed)
}

// Many requests admitted, allocating, freeing and ending at once never
// run out of memory within their reservations, and leave the books
// balanced: once every context is done, the whole budget can be admitted.
func TestAdmitConcurrentNoOOMWithinReservation(t *testing.T) {
	synctest.Test(t, testAdmitConcurrentNoOOMWithinReservation)
}

func testAdmitConcurrentNoOOMWithinReservation(t *testing.T) {
	p, _, dev := newKindPool(t, 32<<20)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var admitted, oomWithin int
	for g := range 12 {
		wg.Go(func() {
			for i := range 50 {
				ctx, cancel := context.WithCancel(context.Background())
				ctx, a, err := p.Admit(ctx, "route=/gen", 5<<20)
				if err != nil {
					assert.ErrorIs(t, err, pool.ErrAdmissionRefused)
					cancel()
					continue
				}
				// 1 + 1.25 + 1.5 MiB fit the 5-MiB reservation; the last
				// 1.75 MiB draws its rest from the free budget, which may
				// refuse it.
				var held []*tensor.Tensor
				for k := range 4 {
					x, err := tensor.New(ctx, p, tensor.Uint8, (4+k)<<18)
					if err != nil {
						assert.ErrorIs(t, err, tensor.ErrOutOfMemory)
						if k < 3 {
							mu.Lock()
							oomWithin++
							mu.Unlock()
						}
						break
					}
					held = append(held, x)
				}
				for _, x := range held {
					assert.NoError(t, x.Free())
				}
				if (g+i)%2 == 0 {
					a.End() // the others end by their contexts alone
				}
				cancel()
				mu.Lock()
				admitted++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	synctest.Wait() // the context.AfterFuncs of the requests that did not End
	assert.Zero(t, oomWithin, "an allocation within a reservation ran out of memory")
	assert.Positive(t, admitted)
	requireBalanced(t, p, dev)
	_, all, err := p.Admit(context.Background(), "route=/all", 32<<20) // no history: the whole budget
	require.NoError(t, err, "a reservation outlived its request: %+v", p.Stats())
	all.End()
	s := requireBalanced(t, p, dev)
	assert.Zero(t, s.Promised)
	assert.Zero(t, s.Admissions)
}

// Once AdmitHistory admitted requests of a kind have ended, Admit
// reserves their p99 peak in the pool's own rounded bytes: a request of
// many small tensors, each rounded up, holds more than the tracker's sum
// of the bytes asked for says.
func TestAdmitReservesPoolsOwnRoundedPeak(t *testing.T) {
	p, _, _ := newKindPool(t, 16<<20)
	run := func() {
		rctx, end := track.WithRequest(context.Background())
		defer end()
		ctx, a, err := p.Admit(track.WithLabels(rctx, "route", "/small"), "route=/small", 1<<20)
		require.NoError(t, err)
		defer a.End()
		var held []*tensor.Tensor
		for range 100 {
			x, err := tensor.New(ctx, p, tensor.Uint8, 513) // a 1024-byte block
			require.NoError(t, err)
			held = append(held, x)
		}
		for _, x := range held {
			require.NoError(t, x.Free())
		}
	}
	for range pool.AdmitHistory {
		run()
	}
	_, a, err := p.Admit(context.Background(), "route=/small", 1<<20)
	require.NoError(t, err)
	defer a.End()
	assert.False(t, a.Fallback)
	assert.EqualValues(t, pool.AdmitHistory, a.Requests)
	assert.EqualValues(t, 100*1024, a.Reserved, "100 blocks of 1 KiB, not the 51,300 bytes asked for")
}

// A nil context is admitted as context.Background is: never ended but by
// End.
func TestAdmitNilContext(t *testing.T) {
	p, _, _ := newKindPool(t, 8<<20)
	//lint:ignore SA1012 Admit reads a nil ctx as context.Background(); this checks that it does
	ctx, a, err := p.Admit(nil, "k", 1<<20)
	require.NoError(t, err)
	require.NotNil(t, ctx)
	assert.EqualValues(t, 1<<20, p.Stats().Promised)
	a.End()
	assert.Zero(t, p.Stats().Promised)
}
