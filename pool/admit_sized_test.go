package pool_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
)

// runSized runs one admitted request of units that holds blocks of
// perUnit bytes a unit (rounded by the pool) at its peak, and reports
// whether its allocations all succeeded.
func runSized(t *testing.T, p *pool.Pool, kind string, units, fallback int64, blockBytes int) (*pool.Admission, bool) {
	t.Helper()
	ctx, a, err := p.AdmitSized(context.Background(), kind, units, fallback)
	require.NoError(t, err)
	defer a.End()
	var held []*tensor.Tensor
	defer func() {
		for _, x := range held {
			require.NoError(t, x.Free())
		}
	}()
	for range units {
		x, err := tensor.New(ctx, p, tensor.Uint8, blockBytes)
		if err != nil {
			require.ErrorIs(t, err, tensor.ErrOutOfMemory)
			return a, false
		}
		held = append(held, x)
	}
	return a, true
}

// A kind with a size learns base + perUnit × units from its ended
// requests and reserves for each request's own size; a size past any it
// has seen, or too little history, reserves the fallback.
func TestAdmitSizedLearnsPerUnit(t *testing.T) {
	p, _, _ := newKindPool(t, 64<<20)
	const kind = "route=/gen"
	a, ok := runSized(t, p, kind, 4, 1<<20, 4096)
	require.True(t, ok)
	assert.True(t, a.Fallback, "no history: the fallback")
	assert.EqualValues(t, 1<<20, a.Reserved)
	assert.EqualValues(t, 4, a.Units)

	for i := range pool.AdmitHistory {
		runSized(t, p, kind, int64(2+i%8), 1<<20, 4096) // 2..9 units of 4 KiB blocks
	}
	for _, units := range []int64{2, 5, 9} {
		// Each admission holds what it reserves, so that the fit stays.
		a, ok := runSized(t, p, kind, units, 1<<20, 4096)
		require.True(t, ok)
		assert.False(t, a.Fallback, "%d units", units)
		assert.InDelta(t, units*4096, a.Reserved, 1, "%d units: 4 KiB a unit", units)
	}
	var got pool.AdmissionKind
	for _, k := range p.Stats().AdmissionKinds {
		if k.Kind == kind {
			got = k
		}
	}
	assert.EqualValues(t, pool.AdmitHistory+4, got.Sized)
	assert.EqualValues(t, 9, got.MaxUnits)
	assert.InDelta(t, 4096, got.PerUnit, 1)
	assert.InDelta(t, 0, got.Base, 1)
	assert.EqualValues(t, pool.AdmitHistory+4, got.Admitted)
	assert.Zero(t, got.Open)

	_, a, err := p.AdmitSized(context.Background(), kind, 10, 1<<20)
	require.NoError(t, err)
	assert.True(t, a.Fallback, "10 units: larger than any the kind has seen")
	assert.EqualValues(t, 1<<20, a.Reserved)
	a.End()

	_, _, err = p.AdmitSized(context.Background(), kind, 0, 1<<20)
	assert.ErrorIs(t, err, tensor.ErrInvalidSize)
	_, _, err = p.AdmitSized(context.Background(), kind, -1, 1<<20)
	assert.ErrorIs(t, err, tensor.ErrInvalidSize)
}

// A request that goes past its reservation raises its kind's next
// reservations at once, one that runs out of memory more; each request
// that ends within its reservation lowers the raise slowly; and the raise
// never takes a reservation past the fallback.
func TestAdmitSizedRaisesAtOnceLowersSlowly(t *testing.T) {
	p, _, _ := newKindPool(t, 64<<20)
	const kind = "route=/gen"
	for range pool.AdmitHistory {
		runSized(t, p, kind, 8, 8<<20, 4096)
	}
	reserve := func() int64 {
		_, a, err := p.AdmitSized(context.Background(), kind, 8, 8<<20)
		require.NoError(t, err)
		defer a.End()
		require.False(t, a.Fallback)
		return a.Reserved
	}
	base := reserve()
	assert.EqualValues(t, 8*4096, base)

	// A request of the same size that holds 12 KiB a unit goes past its
	// 32 KiB at once: the kind raises before that request ends.
	ctx, a, err := p.AdmitSized(context.Background(), kind, 8, 8<<20)
	require.NoError(t, err)
	var held []*tensor.Tensor
	for range 8 {
		x, err := tensor.New(ctx, p, tensor.Uint8, 12<<10)
		require.NoError(t, err)
		held = append(held, x)
	}
	raised := reserve()
	assert.EqualValues(t, base*3/2, raised, "raised by half while the request is still open")
	for _, x := range held {
		require.NoError(t, x.Free())
	}
	a.End()
	// Its peak joined the fit: the line now covers 12 KiB a unit, boosted.
	afterEnd := reserve()
	assert.Greater(t, afterEnd, int64(8*12<<10))

	// Requests within their reservations lower it, a sixteenth at a time.
	prev := afterEnd
	for range 5 {
		runSized(t, p, kind, 8, 8<<20, 4096)
		now := reserve()
		assert.Less(t, now, prev)
		assert.Greater(t, now, prev*3/4, "slowly")
		prev = now
	}
	k := kindOf(t, p, kind)
	assert.EqualValues(t, 1, k.PastReservation)
	assert.Zero(t, k.RanOut)

	// Running out of memory doubles it at once, up to the fallback.
	small, _, _ := newKindPool(t, 1<<20)
	for range pool.AdmitHistory {
		runSized(t, small, kind, 4, 256<<10, 4096)
	}
	_, ok := runSized(t, small, kind, 4, 256<<10, 2<<20) // runs out at once
	assert.False(t, ok)
	k = kindOf(t, small, kind)
	assert.EqualValues(t, 1, k.RanOut)
	assert.EqualValues(t, 2, k.Boost)
	_, a, err = small.AdmitSized(context.Background(), kind, 4, 256<<10)
	require.NoError(t, err)
	assert.EqualValues(t, 2*4*4096, a.Reserved, "doubled at once")
	a.End()
	for range 3 {
		_, ok := runSized(t, small, kind, 4, 24<<10, 2<<20)
		assert.False(t, ok)
	}
	_, a, err = small.AdmitSized(context.Background(), kind, 4, 24<<10)
	require.NoError(t, err)
	assert.EqualValues(t, 24<<10, a.Reserved, "never past the fallback on a raise alone")
	a.End()
}

func kindOf(t *testing.T, p *pool.Pool, kind string) pool.AdmissionKind {
	t.Helper()
	for _, k := range p.Stats().AdmissionKinds {
		if k.Kind == kind {
			return k
		}
	}
	t.Fatalf("no kind %q in %+v", kind, p.Stats().AdmissionKinds)
	return pool.AdmissionKind{}
}

// Sized requests of mixed sizes from 12 goroutines, some holding more than
// they stated, learn and raise their kind while others read it: the books
// balance, the kind's counts add up, and once every request has ended the
// whole budget can be admitted.
func TestAdmitSizedConcurrent(t *testing.T) {
	p, _, dev := newKindPool(t, 32<<20)
	const kind = "route=/gen"
	var admitted, refused atomic.Int64
	// The kind's history first, one request at a time at 64 KiB a unit:
	// past AdmitHistory of them it reserves its line, which the requests
	// below that hold 96 KiB a unit go past, whatever order they run in.
	for i := range pool.AdmitHistory + 4 {
		units := int64(1 + i%8)
		ctx, a, err := p.AdmitSized(context.Background(), kind, units, units*256<<10)
		require.NoError(t, err)
		admitted.Add(1)
		var held []*tensor.Tensor
		for range units {
			x, err := tensor.New(ctx, p, tensor.Uint8, 64<<10)
			require.NoError(t, err)
			held = append(held, x)
		}
		for _, x := range held {
			require.NoError(t, x.Free())
		}
		a.End()
	}
	require.Less(t, kindOf(t, p, kind).PerUnit, float64(96<<10), "learned below what the heavy requests hold")
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Go(func() {
			for i := range 40 {
				units := int64(1 + (g+i)%8)
				ctx, a, err := p.AdmitSized(context.Background(), kind, units, units*256<<10)
				if err != nil {
					assert.ErrorIs(t, err, pool.ErrAdmissionRefused)
					refused.Add(1)
					continue
				}
				admitted.Add(1)
				per := 64 << 10
				if i%7 == 0 {
					per = 96 << 10 // past what its kind learned
				}
				var held []*tensor.Tensor
				for range units {
					x, err := tensor.New(ctx, p, tensor.Uint8, per)
					if err != nil {
						assert.ErrorIs(t, err, tensor.ErrOutOfMemory)
						break
					}
					held = append(held, x)
				}
				for _, x := range held {
					assert.NoError(t, x.Free())
				}
				a.End()
				_ = p.Stats() // readers of the kind while it learns
			}
		})
	}
	wg.Wait()
	requireBalanced(t, p, dev)
	k := kindOf(t, p, kind)
	assert.Equal(t, admitted.Load(), k.Admitted)
	assert.Equal(t, refused.Load(), k.Refused)
	assert.Zero(t, k.Open)
	assert.Zero(t, k.Reserved)
	assert.Positive(t, k.PastReservation)
	_, all, err := p.Admit(context.Background(), "route=/all", 32<<20)
	require.NoError(t, err, "a reservation outlived its request: %+v", p.Stats())
	all.End()
}
