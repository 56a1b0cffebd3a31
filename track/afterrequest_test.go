package track_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
)

// A request's end function runs what AfterRequest arranged before it
// returns, on its own goroutine: the end is a fact at once.
func TestAfterRequestRunsAtTheEndFunction(t *testing.T) {
	for name, begin := range map[string]func(context.Context) (context.Context, func()){
		"WithRequest": func(ctx context.Context) (context.Context, func()) {
			ctx, end := track.WithRequest(ctx)
			return ctx, end
		},
		"BeginRequest": func(ctx context.Context) (context.Context, func()) {
			return track.BeginRequest(ctx, "route", "POST /generate")
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, end := begin(context.Background())
			var ran []string
			track.AfterRequest(ctx, func() { ran = append(ran, "first") })
			track.AfterRequest(track.WithLabels(ctx, "layer", "7"), func() { ran = append(ran, "under labels") })
			stopped := track.AfterRequest(ctx, func() { ran = append(ran, "stopped") })
			require.True(t, stopped())
			assert.Empty(t, ran, "nothing before the end")
			end()
			assert.ElementsMatch(t, []string{"first", "under labels"}, ran, "both, once, before end returned")
			end()
			assert.Len(t, ran, 2, "a second end runs nothing again")
			assert.False(t, stopped(), "a stopped one stays stopped")
		})
	}
}

// A request that ends with its context, and a context with no request, run
// it when the context is done, as context.AfterFunc does; once either way.
func TestAfterRequestRunsWhenTheContextIsDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		ctx, end := track.WithRequest(parent)
		labelled := track.WithLabels(parent, "request", "r1")
		var request, labels, plain atomic.Int32 // each runs on a goroutine of its own
		track.AfterRequest(ctx, func() { request.Add(1) })
		track.AfterRequest(labelled, func() { labels.Add(1) })
		track.AfterRequest(parent, func() { plain.Add(1) })
		cancel()
		synctest.Wait()
		assert.EqualValues(t, 1, request.Load())
		assert.EqualValues(t, 1, labels.Load())
		assert.EqualValues(t, 1, plain.Load())
		end()
		synctest.Wait()
		assert.EqualValues(t, 1, request.Load(), "the end after the context's runs it no more")
	})
}

// A request that has already ended runs it at once; stop then says so.
func TestAfterRequestOnAnEndedRequestRunsAtOnce(t *testing.T) {
	ctx, end := track.WithRequest(context.Background())
	end()
	ran := 0
	stop := track.AfterRequest(ctx, func() { ran++ })
	assert.Equal(t, 1, ran)
	assert.False(t, stop())
}

// Ends and stops racing on several goroutines run each function at most
// once, and exactly once unless stopped.
func TestAfterRequestRacingEndsAndStops(t *testing.T) {
	for range 50 {
		ctx, end := track.BeginRequest(context.Background())
		var ran [8]int
		stops := make([]func() bool, len(ran))
		for i := range ran {
			stops[i] = track.AfterRequest(ctx, func() { ran[i]++ })
		}
		stopped := make([]bool, len(ran))
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; i < len(stops); i += 2 {
				stopped[i] = stops[i]()
			}
		}()
		end()
		<-done
		for i := range ran {
			if stopped[i] {
				assert.Zero(t, ran[i], i)
			} else {
				assert.Equal(t, 1, ran[i], i)
			}
		}
	}
}
