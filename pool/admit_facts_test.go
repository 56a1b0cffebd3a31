package pool_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/synctest"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// An ended admission is a fact for every reader at once: the next
// allocation outside it, Admit, Headroom and Stats all see its reservation
// gone, with no goroutine run in between.
func TestAdmissionEndIsSeenAtOnce(t *testing.T) {
	p, _, _ := newKindPool(t, 8<<20)
	for i := range 20 {
		_, a, err := p.Admit(context.Background(), "route=/gen", 8<<20)
		require.NoError(t, err, "round %d", i)
		_, left := p.Headroom()
		require.Zero(t, left)
		a.End()
		_, left = p.Headroom()
		assert.EqualValues(t, 8<<20, left, "round %d: Headroom", i)
		s := p.Stats()
		assert.Zero(t, s.Promised, "round %d: Stats", i)
		assert.Zero(t, s.Reservations, "round %d", i)
		assert.Zero(t, s.Admissions, "round %d", i)
		x, err := tensor.New(context.Background(), p, tensor.Uint8, 8<<20)
		require.NoError(t, err, "round %d: an allocation right after End", i)
		require.NoError(t, x.Free())
	}
	_, a, err := p.Admit(context.Background(), "route=/gen", 8<<20)
	require.NoError(t, err, "Admit right after End")
	a.End()
}

// A request's end releases its admission as a fact, with no End: a
// request that httptrack, track.BeginRequest or track.WithRequest begins is
// over when its end function returns, and so is its reservation, for every
// reader at once.
func TestAdmissionEndsWithItsRequest(t *testing.T) {
	p, _, _ := newKindPool(t, 8<<20)
	for name, begin := range map[string]func() (context.Context, func()){
		"BeginRequest": func() (context.Context, func()) {
			return track.BeginRequest(context.Background(), "route", "POST /gen")
		},
		"WithRequest": func() (context.Context, func()) {
			ctx, end := track.WithRequest(context.Background())
			return ctx, end
		},
	} {
		for i := range 20 {
			ctx, end := begin()
			actx, a, err := p.Admit(ctx, "route=/gen", 8<<20)
			require.NoError(t, err, "%s round %d", name, i)
			x, err := tensor.New(actx, p, tensor.Uint8, 1<<20)
			require.NoError(t, err)
			require.NoError(t, x.Free())
			end() // no a.End()
			assert.Zero(t, a.Left(), "%s round %d", name, i)
			_, left := p.Headroom()
			assert.EqualValues(t, 8<<20, left, "%s round %d: Headroom", name, i)
			s := p.Stats()
			assert.Zero(t, s.Promised, "%s round %d: Stats", name, i)
			assert.Zero(t, s.Admissions, "%s round %d", name, i)
			y, err := tensor.New(context.Background(), p, tensor.Uint8, 8<<20)
			require.NoError(t, err, "%s round %d: an allocation right after the end", name, i)
			require.NoError(t, y.Free())
		}
	}
}

// A context that is done without End: the admission's own next
// allocation sees it at once, releasing the reservation before it draws;
// every other reader once the context's AfterFunc has run (a context that
// no end function of tensorlife's ends).
func TestAdmissionContextEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _, _ := newKindPool(t, 8<<20)
		ctx, cancel := context.WithCancel(context.Background())
		actx, a, err := p.Admit(ctx, "route=/gen", 6<<20)
		require.NoError(t, err)
		cancel()
		// Under the ended admission, the allocation draws from the free
		// budget, which the released reservation is part of again.
		x, err := tensor.New(actx, p, tensor.Uint8, 7<<20)
		require.NoError(t, err)
		assert.Zero(t, a.Left())
		assert.Zero(t, p.Stats().Promised)
		require.NoError(t, x.Free())

		ctx, cancel = context.WithCancel(context.Background())
		_, a, err = p.Admit(ctx, "route=/gen", 6<<20)
		require.NoError(t, err)
		cancel()
		synctest.Wait() // the context.AfterFunc has run
		assert.Zero(t, a.Left())
		s := p.Stats()
		assert.Zero(t, s.Promised)
		assert.Zero(t, s.Admissions)
		_, b, err := p.Admit(context.Background(), "route=/gen", 8<<20)
		require.NoError(t, err)
		b.End()
	})
}

// The budget holds the bytes held from the device plus the reservations
// not drawn, whatever admitted requests allocate, free and end: a block an
// admission drew and freed that stays cached is never promised a second
// time beside it.
func TestReservedPlusPromisedWithinBudget(t *testing.T) {
	const budget = 8 << 20
	p, _, dev := newKindPool(t, budget)
	check := func(what string) {
		t.Helper()
		s := p.Stats()
		require.LessOrEqual(t, s.Reserved+s.Promised, s.Limit, "%s: %+v", what, s)
	}

	// The case as it was found: the whole budget admitted, drawn, freed.
	ctx, a, err := p.Admit(context.Background(), "route=/gen", budget)
	require.NoError(t, err)
	x, err := tensor.New(ctx, p, tensor.Uint8, budget)
	require.NoError(t, err)
	check("drawn")
	require.NoError(t, x.Free())
	check("freed under the open admission")
	assert.EqualValues(t, budget, a.Left(), "the freed block's bytes are the request's again")
	x, err = tensor.New(ctx, p, tensor.Uint8, budget)
	require.NoError(t, err, "the request draws them again")
	require.NoError(t, x.Free())
	a.End()
	check("ended")

	// And at random: three admissions at a time, each allocating and
	// freeing blocks of mixed sizes, some past their reservations.
	rng := rand.New(rand.NewPCG(1, 2))
	type open struct {
		ctx  context.Context
		a    *pool.Admission
		held []*tensor.Tensor
	}
	var live []*open
	for step := range 2000 {
		switch r := rng.IntN(10); {
		case r == 0 && len(live) < 3:
			ctx, a, err := p.Admit(context.Background(), "route=/gen", int64(1+rng.IntN(3))<<20)
			if err == nil {
				live = append(live, &open{ctx: ctx, a: a})
			}
		case r == 1 && len(live) > 0:
			i := rng.IntN(len(live))
			o := live[i]
			for _, x := range o.held {
				require.NoError(t, x.Free())
			}
			o.a.End()
			live = append(live[:i], live[i+1:]...)
		case r < 6 && len(live) > 0:
			o := live[rng.IntN(len(live))]
			x, err := tensor.New(o.ctx, p, tensor.Uint8, 1+rng.IntN(1<<20))
			if err == nil {
				o.held = append(o.held, x)
			}
		case len(live) > 0:
			o := live[rng.IntN(len(live))]
			if n := len(o.held); n > 0 {
				i := rng.IntN(n)
				require.NoError(t, o.held[i].Free())
				o.held = append(o.held[:i], o.held[i+1:]...)
			}
		}
		check("step " + string(rune('0'+step%10)))
	}
	for _, o := range live {
		for _, x := range o.held {
			require.NoError(t, x.Free())
		}
		o.a.End()
	}
	s := requireBalanced(t, p, dev)
	assert.Zero(t, s.Promised)
}

// A kind is kept and written cut to MaxKindBytes, valid UTF-8, with a
// marker: a 1 MiB label value makes neither a 1 MiB error nor a 1 MiB
// table key.
func TestAdmissionKindIsCut(t *testing.T) {
	p, _, _ := newKindPool(t, 8<<20)
	for _, tc := range []struct {
		name, kind string
	}{
		{"long", "route=" + strings.Repeat("/a", 1<<19)},
		{"long multibyte", "route=" + strings.Repeat("é", 1<<19)},
		{"invalid UTF-8", "route=/\xff\xfe"},
		{"long invalid UTF-8", strings.Repeat("\xff", 1<<10)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := p.Admit(context.Background(), tc.kind, 16<<20)
			var ae *pool.AdmissionError
			require.ErrorAs(t, err, &ae)
			assert.LessOrEqual(t, len(ae.Kind), pool.MaxKindBytes)
			assert.True(t, utf8.ValidString(ae.Kind))
			assert.True(t, utf8.ValidString(err.Error()))
			assert.Less(t, len(err.Error()), 400)
			if len(strings.ToValidUTF8(tc.kind, "\uFFFD")) > pool.MaxKindBytes {
				assert.True(t, strings.HasSuffix(ae.Kind, "…"), "%q", ae.Kind)
			}
		})
	}
	_, _, err := p.Admit(context.Background(), "route=/\xff", 16<<20)
	var ae *pool.AdmissionError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, "route=/\uFFFD", ae.Kind)
}

// Kinds are bounded as the tracker's are: past track.MaxRequestKinds the
// rest are counted together under track.OtherKind.
func TestAdmissionKindsBounded(t *testing.T) {
	p, _, _ := newKindPool(t, 8<<20)
	for i := range track.MaxRequestKinds + 20 {
		kind := "route=/k" + strings.Repeat("x", i)
		_, a, err := p.Admit(context.Background(), kind, 1<<20)
		require.NoError(t, err)
		a.End()
		_, _, err = p.Admit(context.Background(), kind, 16<<20)
		require.ErrorIs(t, err, pool.ErrAdmissionRefused)
	}
	kinds := p.Stats().AdmissionKinds
	require.Len(t, kinds, track.MaxRequestKinds+1)
	other := kinds[len(kinds)-1]
	assert.Equal(t, track.OtherKind, other.Kind)
	assert.EqualValues(t, 20, other.Admitted)
	assert.EqualValues(t, 20, other.Refused)
	var admitted, refused int64
	for _, k := range kinds {
		admitted += k.Admitted
		refused += k.Refused
		assert.Zero(t, k.Open)
		assert.Zero(t, k.Reserved)
	}
	assert.EqualValues(t, track.MaxRequestKinds+20, admitted)
	assert.EqualValues(t, track.MaxRequestKinds+20, refused)
}
