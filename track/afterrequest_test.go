package track_test

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"strings"
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

// A hostile function given to AfterRequest (nil, one that panics, one that
// calls runtime.Goexit) stops none of the request's others: on the end
// function's goroutine every other one runs before the panic or Goexit
// reaches the end's caller; on the context's goroutine a panic is
// recovered and noted on the request's tracker, and the process goes on.
func TestAfterRequestSurvivesHostileFunctions(t *testing.T) {
	hostile := map[string]func(){
		"panics": func() { panic("after request") },
		"exits":  runtime.Goexit,
	}
	for name, f := range hostile {
		t.Run("end function/"+name, func(t *testing.T) {
			ctx, end := track.BeginRequest(context.Background())
			var ran atomic.Int32
			track.AfterRequest(ctx, func() { ran.Add(1) })
			track.AfterRequest(ctx, f)
			track.AfterRequest(ctx, func() { ran.Add(1) })
			assert.False(t, track.AfterRequest(ctx, nil)(), "nil: nothing to stop")
			var panicked any
			done := make(chan struct{})
			go func() {
				defer close(done)
				defer func() { panicked = recover() }()
				end()
			}()
			<-done
			assert.EqualValues(t, 2, ran.Load(), "both neighbours ran")
			if name == "panics" {
				assert.Equal(t, "after request", panicked, "the panic reaches the end's caller")
			}
		})
	}
	t.Run("context's goroutine", func(t *testing.T) {
		var logged strings.Builder
		def := slog.Default()
		slog.SetDefault(slog.New(slog.NewTextHandler(&logged, nil)))
		defer slog.SetDefault(def)
		synctest.Test(t, func(t *testing.T) {
			tr := newTracker(t, track.Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			parent, cancel := context.WithCancel(context.Background())
			ctx := track.WithLabels(parent, "request", "r1")
			r := &track.Record{Bytes: 64}
			require.NoError(t, tr.Books().Record(ctx, r, 0))
			var ran atomic.Int32
			track.AfterRequest(ctx, func() { panic("after request") })
			track.AfterRequest(ctx, func() { ran.Add(1) })
			track.AfterRequest(parent, func() { panic("no request") }) // the default logger's
			cancel()
			synctest.Wait()
			assert.EqualValues(t, 1, ran.Load())
			assert.EqualValues(t, 1, tr.Totals().PartPanics, "noted on the request's tracker")
			require.NoError(t, r.Release())
		})
		assert.Contains(t, logged.String(), "track.AfterRequest panicked", "with no tracker, the default logger")
		assert.Contains(t, logged.String(), "no request")
	})
}
