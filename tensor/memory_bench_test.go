package tensor_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// BenchmarkLiveTensorHostMemory reports the Go heap each live tensor costs
// (handle, block with its embedded track record, cleanup argument), with
// and without tracking. The stack table, shared by every tensor of a site,
// is not counted: all tensors here come from one site.
func BenchmarkLiveTensorHostMemory(b *testing.B) {
	for _, tracked := range []bool{true, false} {
		name := map[bool]string{true: "tracked", false: "untracked"}[tracked]
		b.Run(name, func(b *testing.B) {
			const n = 20000
			dev, err := tensor.NewHostDevice(1 << 30)
			if err != nil {
				b.Fatal(err)
			}
			var tr *track.Tracker
			if tracked {
				if tr, err = track.New(); err != nil {
					b.Fatal(err)
				}
			}
			alloc, err := tensor.NewDeviceAllocator(dev, tr)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			var perTensor float64
			for b.Loop() {
				live := make([]*tensor.Tensor, 0, n)
				before := heapInUse()
				for range n {
					x, err := tensor.New(ctx, alloc, tensor.Float32, 2, 2)
					if err != nil {
						b.Fatal(err)
					}
					live = append(live, x)
				}
				perTensor = float64(heapInUse()-before-8*n) / n // less the slice of handles
				b.StopTimer()
				for _, x := range live {
					if err := x.Free(); err != nil {
						b.Fatal(err)
					}
				}
				// The host device's own bookkeeping (a map entry per block)
				// stands for what a GPU driver keeps; it is counted above.
				b.StartTimer()
			}
			b.ReportMetric(perTensor, "heap-B/live-tensor")
		})
	}
}

func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
