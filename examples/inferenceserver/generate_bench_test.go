package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/tensorlife/tensorlife/track"
)

// BenchmarkGenerate measures one fixed-server request with 16 decode steps,
// through the whole handler (parameters, labels, watcher tick, JSON) and
// as the bare decode loop, the baseline: their ratio is what serving over
// HTTP with tensorlife's watcher adds to the tensor work.
func BenchmarkGenerate(b *testing.B) {
	const tokens = 16
	req := generateRequest{Prompt: 64, Tokens: tokens, Batch: 1}
	b.Run("loop", func(b *testing.B) {
		s := newQuietServer(b, nil)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			// A request id of its own, as the handler gives: one mask per
			// request is not a rebuild.
			id := "r" + strconv.Itoa(i)
			ctx := track.WithLabels(context.Background(), "request", id, "route", "/generate")
			if err := s.generate(ctx, s.nextLane(), req, id); err != nil {
				b.Fatal(err)
			}
		}
		if n := s.rebuilds(); n != 0 {
			b.Fatalf("%d masks rebuilt", n)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*tokens), "ns/token")
	})
	b.Run("handler", func(b *testing.B) {
		s := newQuietServer(b, nil)
		h := s.Handler()
		target := fmt.Sprintf("/generate?prompt=%d&tokens=%d&batch=%d", req.Prompt, req.Tokens, req.Batch)
		b.ReportAllocs()
		for b.Loop() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("POST", target, nil))
			if w.Code != http.StatusOK {
				b.Fatal(w.Body.String())
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*tokens), "ns/token")
	})
}
