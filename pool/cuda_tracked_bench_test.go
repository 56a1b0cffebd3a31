//go:build cuda

package pool_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tensorlife/tensorlife/internal/benchratio"
	"github.com/tensorlife/tensorlife/internal/format"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/cuda"
	"github.com/tensorlife/tensorlife/track"
)

// BenchmarkCUDATrackedOverhead measures what tracking adds to a tensor's
// allocation on a GPU. Three variants of the same size run in interleaved
// batches, the order rotating every round, so that all see the same
// machine and driver state:
//
//	tracked    tensor.New+Free through a warm pool recording into a tracker
//	untracked  the same through a warm pool with pool.Untracked
//	driver     cuMemAlloc+cuMemFree through the Device: what the pool saves
//
// It reports each variant's ns per allocation and free, the ns tracking adds
// per event (an allocation and a free are two events: the figure to set
// beside PyTorch's per-event cost of _record_memory_history), and
// tracked/untracked and driver/tracked as medians of the per-round ratios.
// The ns/op of the framework is per round of three batches; read the
// metrics. scripts/gpu-check.sh runs it on a real GPU.
func BenchmarkCUDATrackedOverhead(b *testing.B) {
	dev, err := cuda.Open(0)
	if err != nil {
		b.Skipf("no CUDA device: %v", err)
	}
	defer dev.Close()
	tr, err := track.New(track.Name(b.Name()))
	if err != nil {
		b.Fatal(err)
	}
	tracked, err := pool.New(dev, pool.Tracker(tr))
	if err != nil {
		b.Fatal(err)
	}
	defer tracked.Close()
	untracked, err := pool.New(dev, pool.Untracked())
	if err != nil {
		b.Fatal(err)
	}
	defer untracked.Close()

	for _, size := range []int{4 << 10, 1 << 20, 16 << 20} {
		b.Run(strings.ReplaceAll(format.Bytes(int64(size)), " ", ""), func(b *testing.B) {
			benchTrackedOverhead(b, dev, tracked, untracked, size)
		})
	}
}

func benchTrackedOverhead(b *testing.B, dev *cuda.Device, tracked, untracked *pool.Pool, size int) {
	const batch = 32
	ctx := context.Background()
	newFree := func(p *pool.Pool) {
		for range batch {
			x, err := tensor.New(ctx, p, tensor.Uint8, size)
			if err != nil {
				b.Fatal(err)
			}
			if err := x.Free(); err != nil {
				b.Fatal(err)
			}
		}
	}
	allocFree := func() {
		for range batch {
			ptr, err := dev.Alloc(int64(size))
			if err != nil {
				b.Fatal(err)
			}
			if err := dev.Free(ptr, int64(size)); err != nil {
				b.Fatal(err)
			}
		}
	}
	variants := [3]func(){func() { newFree(tracked) }, func() { newFree(untracked) }, allocFree}
	for _, v := range variants {
		v() // warm both pools' caches and the driver
	}

	var total [3]time.Duration
	var perRound [3][]time.Duration // each variant's time in each round
	rounds := 0
	b.ReportAllocs()
	descend(benchDepth, func() {
		for b.Loop() {
			var took [3]time.Duration
			for k := range variants {
				i := (k + rounds) % len(variants)
				start := time.Now()
				variants[i]()
				took[i] = time.Since(start)
			}
			for i := range took {
				total[i] += took[i]
				perRound[i] = append(perRound[i], took[i])
			}
			rounds++
		}
	})
	n := float64(rounds * batch)
	b.ReportMetric(float64(total[0].Nanoseconds())/n, "ns/tracked")
	b.ReportMetric(float64(total[1].Nanoseconds())/n, "ns/untracked")
	b.ReportMetric(float64(total[2].Nanoseconds())/n, "ns/driver")
	b.ReportMetric(float64((total[0]-total[1]).Nanoseconds())/(2*n), "ns/event-tracking")
	overhead, err := benchratio.MedianRatio(perRound[0], perRound[1])
	if err != nil {
		b.Fatal(err)
	}
	saved, err := benchratio.MedianRatio(perRound[2], perRound[0])
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(overhead, "tracked/untracked")
	b.ReportMetric(saved, "driver/tracked")
}
