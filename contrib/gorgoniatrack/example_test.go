package gorgoniatrack_test

import (
	"context"
	"fmt"

	gorgonia "gorgonia.org/tensor"

	"github.com/tensorlife/tensorlife/contrib/gorgoniatrack"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// A gorgonia program over a pool: the engine is the one line to add. The
// Denses, and the sum gorgonia makes, are tracked at the lines that made
// them until they are freed.
func Example() {
	dev, _ := tensor.NewHostDevice(64 << 20)
	tr, _ := track.New()
	p, _ := pool.New(dev, pool.Tracker(tr), pool.Budget(16<<20))

	eng, err := gorgoniatrack.NewEngine(p)
	if err != nil {
		fmt.Println(err)
		return
	}
	a := gorgonia.New(gorgonia.WithShape(2, 2), gorgonia.Of(gorgonia.Float32), gorgonia.WithEngine(eng))
	_ = a.Memset(float32(1))
	b, _ := gorgoniatrack.FromSlice(context.Background(), eng, []float32{1, 2, 3, 4}, 2, 2)
	sum, _ := a.Add(b)
	fmt.Println("sum:", sum.Data())

	for _, s := range tr.Snapshot().Sites {
		if s.LiveCount > 0 {
			fmt.Printf("live: %d B at %s:%d\n", s.LiveBytes, "example_test.go", s.Site.Location().Line)
		}
	}
	for _, d := range []*gorgonia.Dense{a, b, sum} {
		if err := gorgoniatrack.Free(d); err != nil {
			fmt.Println(err)
		}
	}
	fmt.Println("live after Free:", tr.Totals().LiveCount)
	// Output:
	// sum: [2 3 4 5]
	// live: 16 B at example_test.go:28
	// live: 16 B at example_test.go:30
	// live: 16 B at example_test.go:31
	// live after Free: 0
}

// A Dense made under a request with New is that request's, and, dropped
// without Free, would be reported (track.OnLeak) at the line of New.
func ExampleNew() {
	dev, _ := tensor.NewHostDevice(64 << 20)
	tr, _ := track.New()
	p, _ := pool.New(dev, pool.Tracker(tr))
	eng, _ := gorgoniatrack.NewEngine(p)

	ctx, end := track.WithRequest(context.Background())
	defer end()
	d, err := gorgoniatrack.New(ctx, eng, gorgonia.Float64, 3, 4)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(d.Shape(), d.Dtype(), "live:", tr.Totals().LiveCount)
	if err := gorgoniatrack.Free(d); err != nil {
		fmt.Println(err)
	}
	fmt.Println("live:", tr.Totals().LiveCount)
	// Output:
	// (3, 4) float64 live: 1
	// live: 0
}
