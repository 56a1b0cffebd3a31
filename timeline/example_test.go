package timeline_test

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/timeline"
	"github.com/tensorlife/tensorlife/track"
)

// rebuildMask leaks: the caller keeps every mask it builds.
func rebuildMask(ctx context.Context, alloc tensor.Allocator, step int) (*tensor.Tensor, error) {
	return tensor.New(ctx, alloc, tensor.Float32, 4, 64+step)
}

// computeLogits makes a tensor that the step frees.
func computeLogits(ctx context.Context, alloc tensor.Allocator) (*tensor.Tensor, error) {
	return tensor.New(ctx, alloc, tensor.Float32, 4, 512)
}

func Example() {
	tr, _ := track.New(track.KeepHistory(1 << 12))
	dev, _ := tensor.NewHostDevice(64 << 20)
	alloc, _ := tensor.NewDeviceAllocator(dev, tr)
	ctx := context.Background()

	var cache []*tensor.Tensor // the bug: masks are kept forever
	for step := range 20 {
		logits, err := computeLogits(ctx, alloc)
		if err != nil {
			fmt.Println(err)
			return
		}
		mask, err := rebuildMask(ctx, alloc, step)
		if err != nil {
			fmt.Println(err)
			return
		}
		cache = append(cache, mask)
		_ = logits.Free()
	}

	tl, err := timeline.Build(tr, timeline.BudgetLine(64<<20))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("masks kept:", len(cache), "events:", tl.Events, "dropped:", tl.Dropped)
	for _, s := range tl.Series {
		fmt.Printf("%s: peak %d bytes, at the end %d\n",
			strings.TrimPrefix(s.Function, "github.com/tensorlife/tensorlife/"), s.Peak, s.Values[len(s.Values)-1])
	}
	// In a program: tl.WriteSVGFile("live.svg") and tl.WriteTraceFile("live.json").
	if err := tl.WriteSVG(io.Discard); err != nil {
		fmt.Println(err)
	}
	// Output:
	// masks kept: 20 events: 60 dropped: 0
	// timeline_test.rebuildMask: peak 23520 bytes, at the end 23520
	// timeline_test.computeLogits: peak 8192 bytes, at the end 0
}
