package gomlxtrack_test

import (
	"context"
	"fmt"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/tensorlife/tensorlife/contrib/gomlxtrack"
	"github.com/tensorlife/tensorlife/track"
)

// A GoMLX program with one line added: Install. Its backend is tracked, and
// Exec books the outputs of a call under its request.
func Example() {
	tr, _ := track.New(track.Name("example"))
	if err := gomlxtrack.Install(tr); err != nil {
		fmt.Println(err)
		return
	}
	backend, _ := backends.NewWithConfig("go")
	add, _ := graph.NewExec(backend, func(x, y *graph.Node) *graph.Node { return graph.Add(x, y) })
	defer add.Finalize()

	ctx, end := track.WithRequest(track.WithLabels(context.Background(), "model", "add"))
	outs, _ := gomlxtrack.Exec(ctx, add, []float32{1, 2}, []float32{3, 4})
	fmt.Println(outs[0].Value())
	buffers := 0
	for _, a := range tr.Snapshot().Allocations {
		if a.Kind == gomlxtrack.KindBuffer {
			buffers++
			fmt.Println(a.Bytes, "bytes", a.DType, a.Shape, "on", a.Device, "labels", a.Labels, "in flight:", a.InFlight)
			fmt.Println("made at", a.Site.Location().Function)
		}
	}
	end()
	_ = outs[0].FinalizeAll()
	fmt.Println("live:", buffers, "buffer; after FinalizeAll:", tr.Totals().LiveCount, "record (the program, until add.Finalize)")
	// Output:
	// [4 6]
	// 8 bytes float32 [2] on go:0 labels {model=add} in flight: true
	// made at github.com/tensorlife/tensorlife/contrib/gomlxtrack_test.Example
	// live: 1 buffer; after FinalizeAll: 1 record (the program, until add.Finalize)
}
