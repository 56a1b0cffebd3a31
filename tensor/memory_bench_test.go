package tensor_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// liveTensors is how many tensors the memory benchmarks keep live at once:
// enough that the registry, the stack table and the Meta table, shared by
// all, are amortised away, as in a service with a large live set.
const liveTensors = 1 << 20

// payload is each tensor's device bytes: float32[2 2].
const payload = 16

// BenchmarkLiveTensorHostMemory reports the host memory each live tensor
// costs, Go heap plus the runtime's off-heap memory that grows with it (the
// finalizer records and span structures), over a million live tensors:
//
//   - "B/tensor": everything, less the benchmark's own slice of handles
//     and, for the host device, the tensor's 16 B of payload (device memory
//     that a GPU would not take from the host);
//   - "heap-B/tensor" and "offheap-B/tensor": the two parts.
//
// The goal is at most 256 B/tensor, tracked, through a warm pool and
// through a DeviceAllocator on the host device (whose bookkeeping, a map
// entry per block, stands for a driver's and is counted).
//
// The runtime keeps freed finalizer records for reuse, so the off-heap
// figure is exact only for the first case a process runs: run one case per
// process (-bench 'LiveTensorHostMemory/tracked/pool$').
func BenchmarkLiveTensorHostMemory(b *testing.B) {
	cases := []struct {
		name    string
		tracked bool
		pooled  bool
	}{
		{"tracked/pool", true, true},
		{"tracked/device", true, false},
		{"untracked/pool", false, true},
		{"untracked/device", false, false},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			dev, err := tensor.NewHostDevice(1 << 30)
			if err != nil {
				b.Fatal(err)
			}
			var tr *track.Tracker
			if tc.tracked {
				if tr, err = track.New(); err != nil {
					b.Fatal(err)
				}
			}
			ctx := context.Background()
			var alloc tensor.Allocator
			if tc.pooled {
				opts := []pool.Option{pool.WithTracker(tr)}
				if tr == nil {
					opts = []pool.Option{pool.WithoutTracking()}
				}
				p, err := pool.New(dev, opts...)
				if err != nil {
					b.Fatal(err)
				}
				defer p.Close()
				alloc = p
			} else if alloc, err = tensor.NewDeviceAllocator(dev, tr); err != nil {
				b.Fatal(err)
			}
			live := make([]*tensor.Tensor, liveTensors)
			fill := func() {
				for i := range live {
					x, err := tensor.New(ctx, alloc, tensor.Float32, 2, 2)
					if err != nil {
						b.Fatal(err)
					}
					live[i] = x
				}
			}
			free := func() {
				for i, x := range live {
					if err := x.Free(); err != nil {
						b.Fatal(err)
					}
					live[i] = nil
				}
			}
			if tc.pooled {
				// Warm the pool with its own blocks, without tensors: the
				// runtime would reuse the finalizer records of freed
				// tensors and hide their cost.
				blocks := make([]tensor.Block, liveTensors)
				for i := range blocks {
					if blocks[i], err = alloc.Allocate(payload); err != nil {
						b.Fatal(err)
					}
				}
				for _, blk := range blocks {
					if err := alloc.Release(blk); err != nil {
						b.Fatal(err)
					}
				}
			}
			var heap, offheap float64
			for b.Loop() {
				before := memUse()
				fill()
				after := memUse()
				heap = float64(after.heap-before.heap) / liveTensors
				offheap = float64(after.offheap-before.offheap) / liveTensors
				if !tc.pooled {
					heap -= payload
				}
				b.StopTimer()
				free()
				b.StartTimer()
			}
			b.ReportMetric(heap+offheap, "B/tensor")
			b.ReportMetric(heap, "heap-B/tensor")
			b.ReportMetric(offheap, "offheap-B/tensor")
			b.ReportMetric(0, "ns/op")
		})
	}
}

type memFigures struct{ heap, offheap int64 }

// memUse collects garbage and reads the Go heap in use and the runtime's
// off-heap memory that grows per object: finalizer and cleanup records
// (OtherSys) and span structures (MSpanInuse).
func memUse() memFigures {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memFigures{heap: int64(ms.HeapAlloc), offheap: int64(ms.OtherSys + ms.MSpanInuse)}
}
