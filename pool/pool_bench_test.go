package pool_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// The benchmarks compare, in one run:
//
//	BenchmarkSyncPoolBaseline         sync.Pool Get+Put of a 4 KiB buffer
//	BenchmarkPoolAllocateRelease      the pool's own hit path, no tensor
//	BenchmarkPoolNewFreeUntracked     tensor.New+Free of 4 KiB, warm pool, untracked
//	BenchmarkPoolNewFree              the same, tracked
//	BenchmarkTrackRecordRelease       the tracker's Record+Release alone
//	BenchmarkTrackFreeSite            the shallow capture tensor.Free adds
//	BenchmarkDeviceAllocatorNewFree   tensor.New+Free straight from the device
//	Benchmark*Parallel                the hit paths under b.RunParallel
//
// Goals: PoolAllocateRelease and PoolNewFreeUntracked within 4x of
// SyncPoolBaseline; PoolNewFree within PoolNewFreeUntracked plus
// TrackRecordRelease. Allocations happen benchDepth frames below the loop,
// as they do in a service, so stack captures cost what they would there.

// benchDepth matches track's BenchmarkRecordRelease.
const benchDepth = 10

const benchBytes = 4096

//go:noinline
func descend(n int, leaf func()) {
	if n == 0 {
		leaf()
		return
	}
	descend(n-1, leaf)
}

func benchPool(b *testing.B, opts ...pool.Option) *pool.Pool {
	b.Helper()
	host, err := tensor.NewHostDevice(64 << 20)
	if err != nil {
		b.Fatal(err)
	}
	p, err := pool.New(host, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := p.Close(); err != nil {
			b.Error(err)
		}
	})
	return p
}

func benchTracker(b *testing.B) *track.Tracker {
	b.Helper()
	tr, err := track.New(track.Name(b.Name()))
	if err != nil {
		b.Fatal(err)
	}
	return tr
}

// newFreeLoop runs tensor.New+Free of benchBytes from alloc, warming it
// first, and reports device allocations per op (0 on a warm pool) if
// devAllocs is not nil.
func newFreeLoop(b *testing.B, alloc tensor.Allocator, devAllocs func() int64) {
	ctx := context.Background()
	warm, err := tensor.New(ctx, alloc, tensor.Uint8, benchBytes)
	if err != nil {
		b.Fatal(err)
	}
	if err := warm.Free(); err != nil {
		b.Fatal(err)
	}
	var before int64
	if devAllocs != nil {
		before = devAllocs()
	}
	b.ReportAllocs()
	descend(benchDepth, func() {
		for b.Loop() {
			x, err := tensor.New(ctx, alloc, tensor.Uint8, benchBytes)
			if err != nil {
				b.Fatal(err)
			}
			if err := x.Free(); err != nil {
				b.Fatal(err)
			}
		}
	})
	if devAllocs != nil {
		b.ReportMetric(float64(devAllocs()-before)/float64(b.N), "devallocs/op")
	}
}

func BenchmarkPoolNewFree(b *testing.B) {
	p := benchPool(b, pool.Tracker(benchTracker(b)))
	newFreeLoop(b, p, func() int64 { return p.Stats().DeviceAllocs })
}

func BenchmarkPoolNewFreeUntracked(b *testing.B) {
	p := benchPool(b, pool.Untracked())
	newFreeLoop(b, p, func() int64 { return p.Stats().DeviceAllocs })
}

func BenchmarkDeviceAllocatorNewFree(b *testing.B) {
	host, err := tensor.NewHostDevice(64 << 20)
	if err != nil {
		b.Fatal(err)
	}
	a, err := tensor.NewDeviceAllocator(host, nil)
	if err != nil {
		b.Fatal(err)
	}
	newFreeLoop(b, a, nil) // one device allocation and free per op
}

func BenchmarkSyncPoolBaseline(b *testing.B) {
	sp := sync.Pool{New: func() any { return new([benchBytes]byte) }}
	sp.Put(sp.Get())
	b.ReportAllocs()
	for b.Loop() {
		buf := sp.Get().(*[benchBytes]byte)
		sp.Put(buf)
	}
}

func BenchmarkPoolAllocateRelease(b *testing.B) {
	p := benchPool(b, pool.Untracked())
	blk, err := p.Allocate(benchBytes)
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Release(blk); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		blk, err := p.Allocate(benchBytes)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Release(blk); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTrackRecordRelease(b *testing.B) {
	tr := benchTracker(b)
	ctx := context.Background()
	shape := []int{benchBytes}
	b.ReportAllocs()
	descend(benchDepth, func() {
		for b.Loop() {
			rec := &track.Record{Bytes: benchBytes, Meta: track.InternMeta("tensor", "host", "uint8", shape)}
			if err := tr.Books().Record(ctx, rec, 0); err != nil {
				b.Fatal(err)
			}
			if err := rec.Release(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkTrackFreeSite is the shallow stack capture tensor.Free makes
// (two frames, kept as raw program counters) to name the first free in a
// double-free report: the tracked path pays it on top of Record+Release.
func BenchmarkTrackFreeSite(b *testing.B) {
	var sink uintptr
	b.ReportAllocs()
	descend(benchDepth, func() {
		for b.Loop() {
			var pc [2]uintptr
			runtime.Callers(1, pc[:])
			sink += pc[0]
		}
	})
	_ = sink
}

// parallelSizes are the two shapes of the parallel benchmarks: every
// goroutine on one size class (its lock is the only one they share), and
// each goroutine on a class of its own (they share no lock: throughput
// should grow with the cores, as it would not with a pool-wide lock).
var parallelSizes = []struct {
	name string
	size func(goroutine int64) int
}{
	{"one-class", func(int64) int { return benchBytes }},
	{"class-per-goroutine", func(g int64) int { return benchBytes + 512*int(g) }},
}

func BenchmarkPoolNewFreeParallel(b *testing.B) {
	for _, tracked := range []bool{false, true} {
		for _, sizes := range parallelSizes {
			name := "untracked/" + sizes.name
			if tracked {
				name = "tracked/" + sizes.name
			}
			b.Run(name, func(b *testing.B) {
				opt := pool.Untracked()
				if tracked {
					opt = pool.Tracker(benchTracker(b))
				}
				p := benchPool(b, opt)
				ctx := context.Background()
				var goroutines atomic.Int64
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					n := sizes.size(goroutines.Add(1))
					for pb.Next() {
						x, err := tensor.New(ctx, p, tensor.Uint8, n)
						if err != nil {
							b.Error(err)
							return
						}
						if err := x.Free(); err != nil {
							b.Error(err)
							return
						}
					}
				})
				s := p.Stats()
				b.ReportMetric(float64(s.Hits)/float64(s.Hits+s.Misses), "hitrate")
			})
		}
	}
}

func BenchmarkPoolAllocateReleaseParallel(b *testing.B) {
	for _, sizes := range parallelSizes {
		b.Run(sizes.name, func(b *testing.B) {
			p := benchPool(b, pool.Untracked())
			var goroutines atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				n := int64(sizes.size(goroutines.Add(1)))
				for pb.Next() {
					blk, err := p.Allocate(n)
					if err != nil {
						b.Error(err)
						return
					}
					if err := p.Release(blk); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

func BenchmarkSyncPoolBaselineParallel(b *testing.B) {
	sp := sync.Pool{New: func() any { return new([benchBytes]byte) }}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			buf := sp.Get().(*[benchBytes]byte)
			sp.Put(buf)
		}
	})
}
