package gorgoniatrack_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gorgonia "gorgonia.org/tensor"

	"github.com/tensorlife/tensorlife/contrib/gorgoniatrack"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

// A Dense made WithEngine is a tracked tensor of its bytes at the line
// that called gorgonia, its data lives in the pool's block, and the
// engine's Free gives the block back.
func TestWithEngineDenseIsTrackedAtTheCallersLine(t *testing.T) {
	e := newEnv(t, 1<<20)
	defer tracktest.VerifyNone(t, e.tr)

	file, line := here()
	d := gorgonia.New(gorgonia.WithShape(4, 8), gorgonia.Of(gorgonia.Float32), gorgonia.WithEngine(e.eng))
	live := e.live(t)
	require.Len(t, live, 1)
	a := live[0]
	assert.EqualValues(t, 4*8*4, a.Bytes)
	assert.Equal(t, gorgoniatrack.Kind, a.Kind)
	assert.Equal(t, "host", a.Device)
	loc := a.Site.Location()
	assert.Equal(t, file, loc.File)
	assert.Equal(t, line+1, loc.Line, "the site is the line that called gorgonia: %s", loc)

	// The Dense's data is the device's memory: what gorgonia writes, the
	// device reads.
	require.NoError(t, d.SetAt(float32(2.5), 1, 2))
	assert.Equal(t, float32(2.5), d.Data().([]float32)[10])
	assert.GreaterOrEqual(t, e.pool.Stats().Active, int64(4*8*4), "the pool hands the block out")

	require.NoError(t, gorgoniatrack.Free(d))
	assert.Empty(t, e.live(t))
	assert.Zero(t, e.eng.Live())
	assert.Zero(t, e.pool.Stats().Active)
}

// Operations that make their result with Clone (Add, Exp, ...) allocate it
// through the engine, at the line of the operation, and compute on the
// device's memory.
func TestOperationResultsAreTrackedAtTheOperationsLine(t *testing.T) {
	e := newEnv(t, 1<<20)
	defer tracktest.VerifyNone(t, e.tr)
	ctx := context.Background()

	a, err := gorgoniatrack.FromSlice(ctx, e.eng, []float64{1, 2, 3, 4}, 2, 2)
	require.NoError(t, err)
	b, err := gorgoniatrack.FromSlice(ctx, e.eng, []float64{10, 20, 30, 40}, 2, 2)
	require.NoError(t, err)
	file, line := here()
	sum, err := a.Add(b)
	require.NoError(t, err)
	assert.Equal(t, []float64{11, 22, 33, 44}, sum.Data())
	assert.Equal(t, []float64{1, 2, 3, 4}, a.Data(), "a safe Add leaves its inputs")
	prod, err := a.MatMul(b)
	require.NoError(t, err)
	assert.Equal(t, []float64{70, 100, 150, 220}, prod.Data())

	require.Len(t, e.live(t), 4)
	var sumSite *track.Site
	for _, x := range e.live(t) {
		if l := x.Site.Location(); l.File == file && l.Line == line+1 {
			sumSite = x.Site
		}
	}
	require.NotNil(t, sumSite, "no tensor made at the line of Add")

	for _, d := range []*gorgonia.Dense{a, b, sum, prod} {
		require.NoError(t, gorgoniatrack.Free(d))
	}
	assert.Zero(t, e.eng.Live())
}

// Free takes back only what the engine's table holds, at its size: a
// second Free, a view, a Dense of gorgonia's own engine and a wrong size
// are typed errors that free nothing.
func TestFreeRefusesWhatTheEngineDoesNotHold(t *testing.T) {
	e := newEnv(t, 1<<20)
	defer tracktest.VerifyNone(t, e.tr)
	d, err := gorgoniatrack.New(context.Background(), e.eng, gorgonia.Int32, 8, 8)
	require.NoError(t, err)

	assert.ErrorIs(t, e.eng.Free(d, 12), tensor.ErrSizeMismatch)
	view, err := d.Slice(gorgonia.S(1, 3))
	require.NoError(t, err)
	assert.ErrorIs(t, gorgoniatrack.Free(view.(*gorgonia.Dense)), tensor.ErrInvalidPointer, "a view holds no allocation of its own")
	plain := gorgonia.New(gorgonia.WithShape(2), gorgonia.Of(gorgonia.Int32))
	assert.ErrorIs(t, gorgoniatrack.Free(plain), tensor.ErrInvalidPointer)
	assert.ErrorIs(t, e.eng.Free(plain, int64(plain.MemSize())), tensor.ErrInvalidPointer)
	require.Len(t, e.live(t), 1, "nothing was freed")

	require.NoError(t, gorgoniatrack.Free(d))
	assert.ErrorIs(t, gorgoniatrack.Free(d), tensor.ErrInvalidPointer, "a second Free")
	assert.ErrorIs(t, gorgoniatrack.Watch(d), tensor.ErrInvalidPointer, "a freed Dense cannot be watched")
}

// What Alloc returned and was freed through itself stays freed: a second
// Free of it is a double free, not the Free of whatever the engine
// allocated since, however often the engine has allocated meanwhile.
func TestFreeOfAllocatedMemoryTwiceIsADoubleFree(t *testing.T) {
	e := newEnv(t, 1<<20)
	defer tracktest.VerifyNone(t, e.tr)
	m, err := e.eng.Alloc(64)
	require.NoError(t, err)
	require.NoError(t, e.eng.Free(m, 64))
	var later []gorgonia.Memory
	for range 16 { // allocations that might have reused what m was
		n, err := e.eng.Alloc(64)
		require.NoError(t, err)
		later = append(later, n)
	}
	assert.ErrorIs(t, e.eng.Free(m, 64), tensor.ErrDoubleFree)
	assert.Equal(t, 16, e.eng.Live(), "the second Free freed none of the later ones")
	for _, n := range later {
		require.NoError(t, e.eng.Free(n, 64))
	}
}

// What the constructors refuse, they refuse before allocating, with the
// core's sentinels.
func TestConstructorsRefuseBadInput(t *testing.T) {
	e := newEnv(t, 1<<20)
	defer tracktest.VerifyNone(t, e.tr)
	ctx := context.Background()
	_, err := gorgoniatrack.New(ctx, e.eng, gorgonia.Float32, 2, -1)
	assert.ErrorIs(t, err, tensor.ErrInvalidShape)
	_, err = gorgoniatrack.New(ctx, e.eng, gorgonia.Float64, 1<<40, 1<<40)
	assert.ErrorIs(t, err, tensor.ErrInvalidShape)
	_, err = gorgoniatrack.New(ctx, e.eng, gorgonia.String, 4)
	assert.ErrorIs(t, err, tensor.ErrInvalidDType, "strings in device memory would hide pointers from the collector")
	_, err = gorgoniatrack.FromSlice(ctx, e.eng, []*int{nil})
	assert.ErrorIs(t, err, tensor.ErrInvalidDType)
	_, err = gorgoniatrack.FromSlice(ctx, e.eng, []float32{1, 2, 3}, 2, 2)
	assert.ErrorIs(t, err, tensor.ErrInvalidShape)
	_, err = gorgoniatrack.New(ctx, nil, gorgonia.Float32, 2)
	assert.ErrorIs(t, err, tensor.ErrNilAllocator)
	assert.Zero(t, e.eng.Live())
}

// Empty Denses and scalars: nothing to allocate for the first, one
// element for the second.
func TestEmptyAndScalarDenses(t *testing.T) {
	e := newEnv(t, 1<<20)
	defer tracktest.VerifyNone(t, e.tr)
	ctx := context.Background()
	empty, err := gorgoniatrack.New(ctx, e.eng, gorgonia.Float32, 0, 3)
	require.NoError(t, err)
	assert.Zero(t, empty.MemSize())
	assert.Empty(t, e.live(t))
	require.NoError(t, gorgoniatrack.Free(empty))
	require.NoError(t, gorgoniatrack.Watch(empty))

	s, err := gorgoniatrack.New(ctx, e.eng, gorgonia.Dtype{})
	assert.ErrorIs(t, err, tensor.ErrInvalidDType, "a zero Dtype")
	assert.NotContains(t, err.Error(), "PANIC", "named without formatting it")
	assert.Nil(t, s)
	s, err = gorgoniatrack.New(ctx, e.eng, gorgonia.Int64)
	require.NoError(t, err)
	assert.True(t, s.IsScalar())
	require.Len(t, e.live(t), 1)
	assert.EqualValues(t, 8, e.live(t)[0].Bytes)
	require.NoError(t, gorgoniatrack.Free(s))
}

// An engine over a device whose memory host code cannot read is refused
// with a typed error: a Dense over it would dereference device addresses.
func TestEngineRefusesDeviceMemory(t *testing.T) {
	dev, err := tensor.NewHostDevice(1 << 20)
	require.NoError(t, err)
	alloc, err := tensor.NewDeviceAllocator(opaqueDevice{dev}, nil)
	require.NoError(t, err)
	_, err = gorgoniatrack.NewEngine(alloc)
	assert.ErrorIs(t, err, gorgoniatrack.ErrNotHostMemory)
	_, err = gorgoniatrack.NewEngine(nil)
	assert.ErrorIs(t, err, tensor.ErrNilAllocator)
}

// opaqueDevice is a device that keeps its memory to itself, as a GPU does.
type opaqueDevice struct{ tensor.Device }

// Goroutines sharing one engine allocate, compute and free at once; the
// table and the tracker agree at the end.
func TestEngineSharedByGoroutines(t *testing.T) {
	e := newEnv(t, 64<<20)
	defer tracktest.VerifyNone(t, e.tr)
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Go(func() {
			ctx, end := track.WithRequest(context.Background())
			defer end()
			eng := e.eng.For(ctx)
			for i := range 50 {
				a, err := gorgoniatrack.FromSlice(ctx, eng, []float32{float32(g), float32(i)})
				if !assert.NoError(t, err) {
					return
				}
				b := gorgonia.New(gorgonia.WithShape(2), gorgonia.Of(gorgonia.Float32), gorgonia.WithEngine(eng))
				sum, err := a.Add(b)
				if !assert.NoError(t, err) {
					return
				}
				assert.Equal(t, []float32{float32(g), float32(i)}, sum.Data())
				for _, d := range []*gorgonia.Dense{a, b, sum} {
					assert.NoError(t, gorgoniatrack.Free(d))
				}
			}
		})
	}
	wg.Wait()
	assert.Zero(t, e.eng.Live())
	assert.Zero(t, e.pool.Stats().Active)
}

// Every Dense is named at the line that called gorgonia or New, on a
// tracker made with helper marks of its own as on any other: NewEngine
// marked gorgonia's packages and the adapter's as library code.
func TestSitesNameTheCallerOnAnyTracker(t *testing.T) {
	dev, err := tensor.NewHostDevice(1 << 20)
	require.NoError(t, err)
	tr, err := track.New(track.HelperFunctions("example.com/service.newScores"))
	require.NoError(t, err)
	p, err := pool.New(dev, pool.Tracker(tr))
	require.NoError(t, err)
	eng, err := gorgoniatrack.NewEngine(p)
	require.NoError(t, err)
	defer tracktest.VerifyNone(t, tr)

	file, line := here()
	g := gorgonia.New(gorgonia.WithShape(4), gorgonia.Of(gorgonia.Float32), gorgonia.WithEngine(eng))
	n, err := gorgoniatrack.New(context.Background(), eng, gorgonia.Float32, 4)
	require.NoError(t, err)
	sum, err := g.Add(n)
	require.NoError(t, err)

	var lines []string
	for _, a := range tr.Snapshot().Allocations {
		loc := a.Site.Location()
		lines = append(lines, fmt.Sprintf("%s:%d", loc.File, loc.Line))
	}
	assert.ElementsMatch(t, []string{
		fmt.Sprintf("%s:%d", file, line+1), fmt.Sprintf("%s:%d", file, line+2), fmt.Sprintf("%s:%d", file, line+4),
	}, lines)
	for _, d := range []*gorgonia.Dense{g, n, sum} {
		require.NoError(t, gorgoniatrack.Free(d))
	}
}

// A reduction's result is made by gorgonia's StdEng on Go memory: not the
// engine's, so neither tracked nor to be freed through it.
func TestReductionsReturnGoMemory(t *testing.T) {
	e := newEnv(t, 1<<20)
	defer tracktest.VerifyNone(t, e.tr)
	a, err := gorgoniatrack.FromSlice(context.Background(), e.eng, []float64{1, 2, 3, 4}, 2, 2)
	require.NoError(t, err)
	sum, err := a.Sum(0)
	require.NoError(t, err)
	assert.Equal(t, []float64{4, 6}, sum.Data())
	assert.Len(t, e.live(t), 1, "only a is tracked")
	assert.ErrorIs(t, gorgoniatrack.Free(sum), tensor.ErrInvalidPointer)
	require.NoError(t, gorgoniatrack.Free(a))
}
