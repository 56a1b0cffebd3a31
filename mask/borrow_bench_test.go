package mask

import (
	"context"
	"errors"
	"testing"

	"github.com/tensorlife/tensorlife/internal/benchratio"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// BenchmarkHitUnderRequestRatio is what a request pays for its cache hit
// being a borrow of the request (GetOrBuild takes the handle under the
// request, so that one it forgets is named at its end) against the same
// hit taken under no request (Get): each op is one request that makes a
// small mask of its own (a request that records is listed in the tracker
// either way), looks the prompt's mask up, frees both and ends.
func BenchmarkHitUnderRequestRatio(b *testing.B) {
	_, bld := benchEnv(b)
	c, err := NewCache()
	if err != nil {
		b.Fatal(err)
	}
	build := func(ctx context.Context) (*tensor.Tensor, error) { return bld.Causal(ctx, 64) }
	m, err := c.GetOrBuild(context.Background(), "prompt", build)
	if err != nil {
		b.Fatal(err)
	}
	if err := m.Free(); err != nil {
		b.Fatal(err)
	}
	serve := func(borrow bool) func() {
		return func() {
			ctx, end := track.WithRequest(context.Background())
			own, err := bld.Causal(ctx, 8)
			if err != nil {
				b.Fatal(err)
			}
			var h *tensor.Tensor
			if borrow {
				h, err = c.GetOrBuild(ctx, "prompt", build)
			} else {
				var ok bool
				if h, ok = c.Get("prompt"); !ok {
					b.Fatal("a miss")
				}
			}
			if err != nil {
				b.Fatal(err)
			}
			if err := errors.Join(h.Free(), own.Free()); err != nil {
				b.Fatal(err)
			}
			end()
		}
	}
	benchratio.Run(b, "borrowed", serve(true), serve(false), benchratio.BaselineName("untracked-hit"))
	if err := c.Close(); err != nil {
		b.Fatal(err)
	}
}
