package watch_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/watch"
)

// buildMask stands for the line that allocates a mask on every decode step.
//
//go:noinline
func buildMask(tr *track.Tracker, ctx context.Context, tokens int) *track.Record {
	mask := &track.Record{Bytes: int64(tokens * tokens), Meta: track.InternMeta("mask", "cuda:0", "bool", []int{tokens, tokens})}
	if err := tr.Books().Record(ctx, mask, 0); err != nil {
		panic(err)
	}
	return mask
}

// serve handles one request: 16 decode steps, each building a mask. The
// leaky version keeps every mask in a cache that nothing bounds, the bug
// the watcher is for; the fixed one frees each mask after its step.
func serve(tr *track.Tracker, cache *[]*track.Record) {
	ctx, end := track.WithRequest(context.Background())
	defer end()
	for step := 1; step <= 16; step++ {
		mask := buildMask(tr, ctx, 64+step)
		if cache != nil {
			*cache = append(*cache, mask)
			continue
		}
		if err := mask.Release(); err != nil {
			panic(err)
		}
	}
}

func Example() {
	for _, leaky := range []bool{false, true} {
		tr, err := track.New()
		if err != nil {
			panic(err)
		}
		var cache *[]*track.Record
		if leaky {
			cache = new([]*track.Record)
		}
		request := 0
		// One window per request; the callback replaces the default
		// slog warning. A mask is judged once it outlived its request.
		w, err := watch.New(tr, watch.OnSuspect(func(s watch.Suspect) {
			fn := s.Site.Location().Function
			fmt.Printf("leaky=%v: after request %d: %s grew in %d of %d windows, %d bytes a window, %d outlived\n",
				leaky, request, fn[strings.LastIndexByte(fn, '/')+1:], s.Grew, s.OfWindows, s.GrowthPerWindow,
				s.OutlivedBytes)
		}))
		if err != nil {
			panic(err)
		}
		for request = 1; request <= 200; request++ {
			serve(tr, cache)
			if err := w.Tick(); err != nil {
				panic(err)
			}
		}
		fmt.Printf("leaky=%v: %d suspects after 200 requests\n", leaky, len(w.Suspects()))
	}
	// Output:
	// leaky=false: 0 suspects after 200 requests
	// leaky=true: after request 6: watch_test.buildMask grew in 6 of 8 windows, 84440 bytes a window, 506640 outlived
	// leaky=true: 1 suspects after 200 requests
}
