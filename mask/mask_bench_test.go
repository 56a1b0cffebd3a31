package mask

import (
	"context"
	"testing"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// benchTokens is one request's length in both benchmarks: each op is one
// token, and a new request starts every benchTokens ops.
const benchTokens = 4096

// benchBatch and benchDType are a decode step's mask: four sequences, an
// additive float32 mask as attention kernels consume it.
const benchBatch = 4

func benchEnv(b *testing.B) (*countingDevice, *Builder) {
	host, err := tensor.NewHostDevice(1 << 30)
	if err != nil {
		b.Fatal(err)
	}
	dev := &countingDevice{Device: host}
	tr, err := track.New()
	if err != nil {
		b.Fatal(err)
	}
	alloc, err := tensor.NewDeviceAllocator(dev, tr)
	if err != nil {
		b.Fatal(err)
	}
	bld, err := NewBuilder(alloc, DType(tensor.Float32))
	if err != nil {
		b.Fatal(err)
	}
	return dev, bld
}

// BenchmarkMaskAppend is the fix: one growable mask per request, from a
// capacity hint of 1, one Append per generated token. Goal: 0 allocs/op
// (per token) and at most 13 device allocations per 4096 tokens.
func BenchmarkMaskAppend(b *testing.B) {
	dev, bld := benchEnv(b)
	ctx := context.Background()
	var g *Growable
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i%benchTokens == 0 {
			if g != nil {
				if err := g.Free(); err != nil {
					b.Fatal(err)
				}
			}
			var err error
			if g, err = bld.NewGrowable(ctx, benchBatch, 1); err != nil {
				b.Fatal(err)
			}
		}
		if err := g.Append(1); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if g != nil {
		if err := g.Free(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(dev.allocs.Load())*benchTokens/float64(b.N), "device-allocs/4096tok")
}

// BenchmarkMaskRebuildPerStep is the seed's pattern for comparison: a new
// padding mask of the current length at every token, freed at once (the
// leak itself removed, the rebuilding kept). Compare ns/op, both per token.
func BenchmarkMaskRebuildPerStep(b *testing.B) {
	dev, bld := benchEnv(b)
	ctx := context.Background()
	lengths := make([]int, benchBatch)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		pos := i%benchTokens + 1
		for s := range lengths {
			lengths[s] = pos
		}
		m, err := bld.Padding(ctx, lengths, pos)
		if err != nil {
			b.Fatal(err)
		}
		if err := m.Free(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(dev.allocs.Load())*benchTokens/float64(b.N), "device-allocs/4096tok")
}
