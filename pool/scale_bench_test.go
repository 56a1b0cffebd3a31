package pool_test

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tensorlife/tensorlife/internal/benchratio"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
)

// scaleGoroutines is the crowd of BenchmarkNewFreeScaling: the request
// goroutines of a busy inference server, most allocating one size class.
const scaleGoroutines = 8

// scaleRoundOps is the operations each side of one round does in all: the
// lone goroutine does them all, the crowd scaleRoundOps/scaleGoroutines
// each. A round lasts about a millisecond, long against waking the crowd.
const scaleRoundOps = 4096

// BenchmarkNewFreeScaling measures how the cost per operation of
// tensor.New+Free of one size through a warm pool changes when
// scaleGoroutines goroutines do it at once instead of one, against the
// same change for sync.Pool Get+Put, the standard library's per-P cache.
// Each round times, for sync.Pool, an untracked pool and a tracked one,
// scaleRoundOps operations done by one goroutine and the same number
// shared by the crowd, in an order that alternates from round to round;
// every operation runs benchDepth frames below its goroutine's loop. It
// reports medians over rounds:
//
//   - x-8v1-<variant>: the crowd's time per operation over the lone
//     goroutine's (1/GOMAXPROCS at best, when every core is free; 1 with
//     one core; above 1 when the goroutines slow each other);
//   - x-<variant>-vs-syncpool: x-8v1-<variant> over sync.Pool's in the same
//     round (goal: <= 1.5);
//   - <variant>-1-ns/op and <variant>-8-ns/op, and each variant's
//     allocations per operation.
//
// The figure is only as good as the free cores: with GOMAXPROCS=1 every
// ratio is about 1, and on a loaded machine the crowd's time is the
// neighbours' as much as the pool's. Read it with -cpu set to the cores
// that are free.
func BenchmarkNewFreeScaling(b *testing.B) {
	untracked := benchPool(b, pool.Untracked())
	tracked := benchPool(b, pool.Tracker(benchTracker(b)))
	sp := &sync.Pool{New: func() any { return new([benchBytes]byte) }}
	variants := []scaleVariant{
		{name: "syncpool", op: func() { sp.Put(sp.Get()) }},
		{name: "untracked", op: newFreeOp(b, untracked)},
		{name: "tracked", op: newFreeOp(b, tracked)},
	}
	for i := range variants {
		v := &variants[i]
		v.op() // warm: the pools' blocks are cached from here on
		v.allocs = testing.AllocsPerRun(100, v.op)
		v.crowd = startCrowd(b, scaleGoroutines, v.op)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += scaleRoundOps {
		for i := range variants {
			variants[i].round(len(variants[i].one)%2 == 0)
		}
	}
	b.StopTimer()
	reportScaling(b, variants)
}

// newFreeOp returns a tensor.New+Free of benchBytes from p.
func newFreeOp(b *testing.B, p *pool.Pool) func() {
	ctx := context.Background()
	return func() {
		x, err := tensor.New(ctx, p, tensor.Uint8, benchBytes)
		if err != nil {
			b.Error(err)
			return
		}
		if err := x.Free(); err != nil {
			b.Error(err)
		}
	}
}

// scaleVariant is one operation and its rounds' timings.
type scaleVariant struct {
	name     string
	op       func()
	allocs   float64
	crowd    *crowd
	one, all []time.Duration // per round: the lone goroutine, the crowd
}

// round times scaleRoundOps operations on one goroutine and on the crowd,
// the lone one first if loneFirst.
func (v *scaleVariant) round(loneFirst bool) {
	lone := func() { v.one = append(v.one, v.crowd.run(1, scaleRoundOps)) }
	many := func() {
		v.all = append(v.all, v.crowd.run(scaleGoroutines, scaleRoundOps/scaleGoroutines))
	}
	if loneFirst {
		lone()
		many()
	} else {
		many()
		lone()
	}
}

func reportScaling(b *testing.B, variants []scaleVariant) {
	base := variants[0]
	baseRatios := roundRatios(base.all, base.one)
	for _, v := range variants {
		ratio, err := benchratio.MedianRatio(v.all, v.one)
		if err != nil {
			return // the first, one-operation runs time nothing
		}
		b.ReportMetric(ratio, "x-8v1-"+v.name)
		b.ReportMetric(medianPerOp(v.one), v.name+"-1-ns/op")
		b.ReportMetric(medianPerOp(v.all), v.name+"-8-ns/op")
		b.ReportMetric(v.allocs, v.name+"-allocs/op")
		if v.name == base.name {
			continue
		}
		// The crowd's penalty relative to sync.Pool's, round by round:
		// both ratios of one round saw the same neighbours.
		vs, err := benchratio.MedianRatio(roundRatios(v.all, v.one), baseRatios)
		if err == nil {
			b.ReportMetric(vs, "x-"+v.name+"-vs-"+base.name)
		}
	}
}

// roundRatios returns a[i]/b[i] per round as durations of a common scale,
// for benchratio.MedianRatio.
func roundRatios(a, b []time.Duration) []time.Duration {
	out := make([]time.Duration, len(a))
	for i := range a {
		if b[i] > 0 {
			out[i] = time.Duration(float64(a[i]) / float64(b[i]) * 1e6)
		}
	}
	return out
}

// medianPerOp returns the median over rounds of the time per operation,
// in nanoseconds.
func medianPerOp(rounds []time.Duration) float64 {
	xs := make([]float64, len(rounds))
	for i, d := range rounds {
		xs[i] = float64(d) / scaleRoundOps
	}
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// crowd is a set of goroutines that run op on demand, each benchDepth
// frames below its loop, as request goroutines allocate. They live until
// the benchmark ends.
type crowd struct {
	start []chan int // per goroutine: how many ops to run
	done  sync.WaitGroup
}

func startCrowd(b *testing.B, n int, op func()) *crowd {
	c := &crowd{start: make([]chan int, n)}
	for i := range c.start {
		ch := make(chan int)
		c.start[i] = ch
		go func() {
			descend(benchDepth, func() {
				for ops := range ch {
					for range ops {
						op()
					}
					c.done.Done()
				}
			})
		}()
	}
	b.Cleanup(func() {
		for _, ch := range c.start {
			close(ch)
		}
	})
	return c
}

// run has the first k goroutines run ops operations each and returns the
// wall time until the last is done.
func (c *crowd) run(k, ops int) time.Duration {
	runtime.Gosched() // start the round with the lone side's core to itself
	c.done.Add(k)
	start := time.Now()
	for _, ch := range c.start[:k] {
		ch <- ops
	}
	c.done.Wait()
	return time.Since(start)
}
