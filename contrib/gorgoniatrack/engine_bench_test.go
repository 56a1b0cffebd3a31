package gorgoniatrack_test

import (
	"context"
	"testing"

	gorgonia "gorgonia.org/tensor"

	"github.com/tensorlife/tensorlife/contrib/gorgoniatrack"
	"github.com/tensorlife/tensorlife/internal/benchratio"
	"github.com/tensorlife/tensorlife/tensor"
)

// The engine's Alloc and Free against the same tracked tensor made and
// freed through the pool alone (tensor.Make of the same spec, under the
// same context, from the same tracker): what the engine adds is finding
// the block's host memory, zeroing it, and its table of live addresses.
// The engine is called through gorgonia's Engine interface, as gorgonia
// calls it: Alloc for a Dense's array (Dense.makeArray keeps only the
// address), Free with the Dense, whose address is the allocation's
// (denseMemory). Sizes are a small vector and a 64x64 float32 matrix. The
// aim is at most 1.1x; README.md gives the figures and where the rest
// goes.
func BenchmarkEngineAllocFreeRatio(b *testing.B) {
	for _, size := range []int64{256, 64 * 64 * 4} {
		b.Run(byteSize(size), func(b *testing.B) {
			e := newEnv(b, 1<<30)
			ctx := context.Background()
			spec := tensor.Spec{DType: tensor.Uint8, Shape: tensor.Shape{int(size)}, Kind: gorgoniatrack.Kind}
			var eng gorgonia.Engine = e.eng // as gorgonia calls it
			dense := new(denseMemory)       // one, so that no Free boxes one
			engine := func() {
				m, err := eng.Alloc(size)
				if err != nil {
					b.Fatal(err)
				}
				dense.addr, dense.size = m.Uintptr(), m.MemSize()
				if err := eng.Free(dense, size); err != nil {
					b.Fatal(err)
				}
			}
			alone := func() {
				t, err := tensor.Make(ctx, e.pool, spec)
				if err != nil {
					b.Fatal(err)
				}
				if err := t.Free(); err != nil {
					b.Fatal(err)
				}
			}
			engine() // warm the pool's class and both sites
			alone()
			benchratio.Run(b, "engine", engine, alone, benchratio.BaselineName("pool"))
		})
	}
}

// What a gorgonia user writes, New and Free of a 64x64 float32 Dense,
// against gorgonia's own New of the same Dense on Go memory, which the
// collector frees: the price of a budgeted, tracked Dense.
func BenchmarkNewDense(b *testing.B) {
	e := newEnv(b, 1<<30)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		d, err := gorgoniatrack.New(ctx, e.eng, gorgonia.Float32, 64, 64)
		if err != nil {
			b.Fatal(err)
		}
		if err := gorgoniatrack.Free(d); err != nil {
			b.Fatal(err)
		}
	}
}

// denseMemory is what gorgonia hands Free: a Dense, a gorgonia.Memory of
// the allocation's address and size.
type denseMemory struct{ addr, size uintptr }

func (m *denseMemory) Uintptr() uintptr { return m.addr }
func (m *denseMemory) MemSize() uintptr { return m.size }

func byteSize(n int64) string {
	if n >= 1<<10 {
		return itoa(n>>10) + "KiB"
	}
	return itoa(n) + "B"
}

func itoa(n int64) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
