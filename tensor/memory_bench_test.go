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
//   - "B/tensor": what tensorlife costs per live tensor (the goal is at
//     most 256 B, tracked): block, handle, finalizer, record, and their
//     share of the tracker's tables;
//   - "heap-B/tensor" and "offheap-B/tensor": its two parts;
//   - "device-B/block", through a DeviceAllocator: what the host device
//     itself keeps per block (the payload and the slot that finds it),
//     measured over as many raw device allocations in the same run and
//     left out of B/tensor, as a GPU driver's bookkeeping would be. A warm
//     pool's blocks exist before the tensors do, so it has none.
//
// Each case fills its million tensors once and keeps them until every case
// has run: the runtime reuses the finalizer records of freed tensors, and a
// later case would otherwise not pay for its own.
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
	var kept [][]*tensor.Tensor
	b.Cleanup(func() {
		for _, live := range kept {
			for _, x := range live {
				if err := x.Free(); err != nil {
					b.Error(err)
				}
			}
		}
	})
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			live, m := liveTensorMemory(b, tc.tracked, tc.pooled)
			kept = append(kept, live)
			for b.Loop() {
				// The figures are of one fill, above: a second would reuse
				// the first one's finalizer records.
			}
			b.ReportMetric(m.heap+m.offheap, "B/tensor")
			b.ReportMetric(m.heap, "heap-B/tensor")
			b.ReportMetric(m.offheap, "offheap-B/tensor")
			if !tc.pooled {
				b.ReportMetric(m.device, "device-B/block")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

type perTensor struct{ heap, offheap, device float64 }

// liveTensorMemory makes liveTensors tensors and returns them with what
// each costs.
func liveTensorMemory(b *testing.B, tracked, pooled bool) ([]*tensor.Tensor, perTensor) {
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
	var alloc tensor.Allocator
	if pooled {
		opts := []pool.Option{pool.Tracker(tr)}
		if tr == nil {
			opts = []pool.Option{pool.Untracked()}
		}
		p, err := pool.New(dev, opts...)
		if err != nil {
			b.Fatal(err)
		}
		// Warm the pool with its own blocks, without tensors.
		blocks := make([]tensor.Block, liveTensors)
		for i := range blocks {
			if blocks[i], err = p.Allocate(payload); err != nil {
				b.Fatal(err)
			}
		}
		for _, blk := range blocks {
			if err := p.Release(blk); err != nil {
				b.Fatal(err)
			}
		}
		alloc = p
	} else if alloc, err = tensor.NewDeviceAllocator(dev, tr); err != nil {
		b.Fatal(err)
	}
	var device float64
	if !pooled {
		device = deviceMemoryPerBlock(b)
	}
	ctx := context.Background()
	live := make([]*tensor.Tensor, liveTensors)
	before := memUse()
	for i := range live {
		if live[i], err = tensor.New(ctx, alloc, tensor.Float32, 2, 2); err != nil {
			b.Fatal(err)
		}
	}
	after := memUse()
	return live, perTensor{
		heap:    float64(after.heap-before.heap)/liveTensors - device,
		offheap: float64(after.offheap-before.offheap) / liveTensors,
		device:  device,
	}
}

// deviceMemoryPerBlock returns the heap a fresh host device takes per live
// block of payload bytes, over liveTensors blocks.
func deviceMemoryPerBlock(b *testing.B) float64 {
	dev, err := tensor.NewHostDevice(1 << 30)
	if err != nil {
		b.Fatal(err)
	}
	ptrs := make([]tensor.DevicePtr, liveTensors)
	before := memUse()
	for i := range ptrs {
		if ptrs[i], err = dev.Alloc(payload); err != nil {
			b.Fatal(err)
		}
	}
	after := memUse()
	for _, p := range ptrs {
		if err := dev.Free(p, payload); err != nil {
			b.Fatal(err)
		}
	}
	return float64(after.heap-before.heap) / liveTensors
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
