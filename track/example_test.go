package track_test

import (
	"context"
	"fmt"

	"github.com/tensorlife/tensorlife/track"
)

func Example() {
	tr, err := track.New(track.Name("example"))
	if err != nil {
		panic(err)
	}
	ctx := track.WithLabels(context.Background(), "request", "r-1")

	// What package tensor does for every tensor it makes:
	rec := &track.Record{Bytes: 4096, Meta: track.InternMeta("mask", "host", "bool", []int{64, 64})}
	if err := tr.Books().Record(ctx, rec, 0); err != nil {
		panic(err)
	}

	snap := tr.Snapshot()
	top := snap.Top(1)[0]
	fmt.Println("live:", snap.Totals.LiveCount, "tensors,", snap.Totals.LiveBytes, "bytes")
	fmt.Println("top site:", top.Site.Location().Function, top.LiveBytes, "bytes")
	fmt.Println("labels:", snap.Allocations[0].Labels)

	if err := rec.Release(); err != nil {
		panic(err)
	}
	fmt.Println("live after release:", tr.Totals().LiveCount)
	// Output:
	// live: 1 tensors, 4096 bytes
	// top site: github.com/tensorlife/tensorlife/track_test.Example 4096 bytes
	// labels: {request=r-1}
	// live after release: 0
}
