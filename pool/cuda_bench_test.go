//go:build cuda

package pool_test

import (
	"fmt"
	"testing"

	"github.com/tensorlife/tensorlife/internal/format"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor/cuda"
)

// benchSizes are the request sizes compared on a real GPU.
var benchSizes = []int64{4 << 10, 256 << 10, 1 << 20, 16 << 20, 64 << 20}

// BenchmarkCUDAPoolVsDevice compares a warm pool hit (Allocate + Release
// of a cached block) with cuMemAlloc + cuMemFree of the same size, on
// device 0. Run it where a GPU is present (scripts/cuda-testbin.sh).
func BenchmarkCUDAPoolVsDevice(b *testing.B) {
	dev, err := cuda.Open(0)
	if err != nil {
		b.Skipf("no CUDA device: %v", err)
	}
	defer dev.Close()
	p, err := pool.New(dev, pool.Untracked())
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	for _, size := range benchSizes {
		name := format.Bytes(size)
		b.Run(fmt.Sprintf("pool/%s", name), func(b *testing.B) {
			warm, err := p.Allocate(size)
			if err != nil {
				b.Fatal(err)
			}
			if err := p.Release(warm); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				blk, err := p.Allocate(size)
				if err != nil {
					b.Fatal(err)
				}
				if err := p.Release(blk); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(p.Stats().DeviceAllocs), "device-allocs")
		})
		b.Run(fmt.Sprintf("device/%s", name), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ptr, err := dev.Alloc(size)
				if err != nil {
					b.Fatal(err)
				}
				if err := dev.Free(ptr, size); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
