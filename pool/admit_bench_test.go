package pool_test

import (
	"context"
	"testing"

	"github.com/tensorlife/tensorlife/internal/benchratio"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// admitBench is a pool with open requests: each begun by WithRequest,
// labelled with its route, holding one tensor and admitted; and the kind
// has history, so Admit reads its peak.
type admitBench struct {
	p     *pool.Pool
	ctx   context.Context
	close func()
}

func newAdmitBench(b *testing.B, open int) *admitBench {
	b.Helper()
	tr, err := track.New(track.Name(b.Name()), track.RequestKinds("route"))
	if err != nil {
		b.Fatal(err)
	}
	host, err := tensor.NewHostDevice(1 << 30)
	if err != nil {
		b.Fatal(err)
	}
	p, err := pool.New(host, pool.Tracker(tr), pool.Budget(1<<30))
	if err != nil {
		b.Fatal(err)
	}
	begin := func() (context.Context, context.CancelFunc) {
		ctx, end := track.WithRequest(context.Background())
		return track.WithLabels(ctx, "route", "/gen"), end
	}
	for range pool.AdmitHistory {
		ctx, end := begin()
		x, err := tensor.New(ctx, p, tensor.Uint8, 4096)
		if err != nil {
			b.Fatal(err)
		}
		_ = x.Free()
		end()
	}
	var held []*tensor.Tensor
	var ends []context.CancelFunc
	for range open {
		ctx, end := begin()
		ctx, a, err := p.Admit(ctx, "route=/gen", 0)
		if err != nil {
			b.Fatal(err)
		}
		x, err := tensor.New(ctx, p, tensor.Uint8, 512)
		if err != nil {
			b.Fatal(err)
		}
		held = append(held, x)
		ends = append(ends, func() { a.End(); end() })
	}
	if got := tr.OpenRequests(1).Count; got < open {
		b.Fatalf("%d open requests, want %d", got, open)
	}
	ctx, cancel := begin()
	return &admitBench{p: p, ctx: ctx, close: func() {
		for i, x := range held {
			_ = x.Free()
			ends[i]()
		}
		cancel()
		_ = p.Close()
	}}
}

// admit admits one request of the kind under ab's context and ends it.
func (ab *admitBench) admit(b *testing.B) {
	_, a, err := ab.p.Admit(ab.ctx, "route=/gen", 0)
	if err != nil {
		b.Fatal(err)
	}
	a.End()
}

// BenchmarkAdmitOpenRequestsRatio compares Admit+End with 10k requests
// open and admitted with the same at 100, in interleaved rounds: a
// reservation is O(1) in the open requests (goal: x-admit-10k ≈ 1, and
// admit-10k-ns/op ≤ 1000).
func BenchmarkAdmitOpenRequestsRatio(b *testing.B) {
	many, few := newAdmitBench(b, 10_000), newAdmitBench(b, 100)
	defer many.close()
	defer few.close()
	benchratio.Run(b, "admit-10k", func() { many.admit(b) }, func() { few.admit(b) },
		benchratio.BaselineName("admit-100"))
}

// BenchmarkAdmittedNewFreeRatio compares a tracked tensor.New+Free through
// a warm pool under an admitted request's context with the same under a
// plain request's context, while that admission is open: what drawing
// from a reservation adds (a context lookup, a few atomics).
func BenchmarkAdmittedNewFreeRatio(b *testing.B) {
	tr, err := track.New(track.Name(b.Name()))
	if err != nil {
		b.Fatal(err)
	}
	p := benchPool(b, pool.Tracker(tr), pool.Budget(32<<20))
	rctx, end := track.WithRequest(context.Background())
	defer end()
	rctx = track.WithLabels(rctx, "route", "/gen")
	actx, a, err := p.Admit(rctx, "route=/gen", 1<<20)
	if err != nil {
		b.Fatal(err)
	}
	defer a.End()
	newFree := func(ctx context.Context) func() {
		return func() {
			x, err := tensor.New(ctx, p, tensor.Uint8, benchBytes)
			if err != nil {
				b.Fatal(err)
			}
			if err := x.Free(); err != nil {
				b.Fatal(err)
			}
		}
	}
	admitted, plain := newFree(actx), newFree(rctx)
	admitted()
	plain()
	benchratio.Run(b, "admitted", admitted, plain, benchratio.BaselineName("plain"))
}

// refuse asks for a reservation larger than what the open admissions left
// of the budget, which Admit refuses.
func (ab *admitBench) refuse(b *testing.B) {
	_, _, err := ab.p.Admit(ab.ctx, "route=/huge", ab.p.Budget())
	if err == nil {
		b.Fatal("admitted a reservation of the whole budget beside open admissions")
	}
}

// BenchmarkAdmitRefusedOpenRequestsRatio compares a refused Admit with 10k
// requests open and admitted with the same at 100, in interleaved rounds:
// under overload refusals are the common path, and a refusal reads the
// budget's figures, never the open admissions (goal: x-refuse-10k ≤ 1.5).
func BenchmarkAdmitRefusedOpenRequestsRatio(b *testing.B) {
	many, few := newAdmitBench(b, 10_000), newAdmitBench(b, 100)
	defer many.close()
	defer few.close()
	benchratio.Run(b, "refuse-10k", func() { many.refuse(b) }, func() { few.refuse(b) },
		benchratio.BaselineName("refuse-100"))
}
