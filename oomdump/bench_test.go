package oomdump_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/tensorlife/tensorlife/internal/benchratio"
	"github.com/tensorlife/tensorlife/oomdump"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// BenchmarkDumpStartCost times, in alternating rounds of one allocation
// each, the failing allocation that starts a dump against a failing
// allocation from a pool without a dumper, over one tracker holding 100k
// live tensors from 64 lines, each under a request label of its own. The
// dump's files are written between rounds, off the clock, as they are
// written off the failing goroutine, and the heap is collected there too,
// followed by one allocation of each kind to warm up.
// Goal: x-dump at most 2.
func BenchmarkDumpStartCost(b *testing.B) {
	tr, err := track.New(track.Name("bench"))
	if err != nil {
		b.Fatal(err)
	}
	dumper, err := oomdump.New(tr, b.TempDir(), oomdump.Interval(0))
	if err != nil {
		b.Fatal(err)
	}
	dev, err := tensor.NewHostDevice(256 << 20)
	if err != nil {
		b.Fatal(err)
	}
	plain, err := pool.New(dev, pool.Tracker(tr), pool.Budget(64<<20))
	if err != nil {
		b.Fatal(err)
	}
	dumping, err := pool.New(dev, pool.Tracker(tr), pool.Budget(64<<20), pool.OnOutOfMemory(dumper.OutOfMemory))
	if err != nil {
		b.Fatal(err)
	}
	var live []*tensor.Tensor
	for i := range 100_000 {
		ctx := track.WithLabels(context.Background(), "request", fmt.Sprint(i))
		atLine(i%64, 6, func() {
			x, err := tensor.New(ctx, plain, tensor.Uint8, 64)
			if err != nil {
				b.Fatal(err)
			}
			live = append(live, x)
		})
	}
	b.Cleanup(func() {
		for _, x := range live {
			_ = x.Free()
		}
		_ = dumper.Close()
		_ = dumping.Close()
		_ = plain.Close()
	})
	fail := func(p *pool.Pool) time.Duration {
		start := time.Now()
		_, err := tensor.New(context.Background(), p, tensor.Uint8, 128<<20)
		d := time.Since(start)
		if !errors.Is(err, tensor.ErrOutOfMemory) {
			b.Fatalf("got %v, want an out-of-memory error", err)
		}
		return d
	}
	var withDump, without []time.Duration
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			withDump = append(withDump, fail(dumping))
			without = append(without, fail(plain))
		} else {
			without = append(without, fail(plain))
			withDump = append(withDump, fail(dumping))
		}
		b.StopTimer()
		if err := dumper.Wait(); err != nil {
			b.Fatal(err)
		}
		// The collection the writer's garbage calls for would land on
		// either side at random: it runs here, off the clock, and so do
		// an allocation of each kind that sweeps after it and warms the
		// caches again, as a service's allocations keep them warm.
		runtime.GC()
		fail(plain)
		fail(dumping)
		if err := dumper.Wait(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	if got := dumper.Stats().Dumps; got != 2*int64(b.N) {
		b.Fatalf("%d dumps for %d rounds", got, b.N)
	}
	ratio, err := benchratio.MedianRatio(withDump, without)
	if err != nil {
		return
	}
	b.ReportMetric(ratio, "x-dump")
}

// lineA and lineB spell out the low n bits of bits as a chain of calls, so
// that each number below 1<<n allocates from a call stack of its own.
//
//go:noinline
func lineA(bits, n int, leaf func()) { atLine(bits>>1, n-1, leaf) }

//go:noinline
func lineB(bits, n int, leaf func()) { atLine(bits>>1, n-1, leaf) }

func atLine(bits, n int, leaf func()) {
	switch {
	case n == 0:
		leaf()
	case bits&1 == 0:
		lineA(bits, n, leaf)
	default:
		lineB(bits, n, leaf)
	}
}
