package httptrack_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tensorlife/tensorlife/internal/benchratio"
	"github.com/tensorlife/tensorlife/track/httptrack"
)

// BenchmarkRouteRatio serves one request through a ServeMux whose route is
// wrapped by Route against the same mux with the bare handler, no tensors
// made, in alternating rounds: what httptrack adds to a request (goal: at
// most 0.5 µs, the difference of the two ns/op figures).
func BenchmarkRouteRatio(b *testing.B) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.Context().Done() // a handler that selects on its context, as most do
		w.WriteHeader(http.StatusNoContent)
	})
	tracked, bare := http.NewServeMux(), http.NewServeMux()
	httptrack.Handle(tracked, "POST /generate", handler)
	bare.Handle("POST /generate", handler)
	req := httptest.NewRequest(http.MethodPost, "/generate", nil)
	w := &discard{header: http.Header{}}
	// Each request under a cancellable context of its own, cancelled
	// after the handler returns, as net/http's server does.
	serve := func(mux *http.ServeMux) func() {
		return func() {
			ctx, cancel := context.WithCancel(context.Background())
			mux.ServeHTTP(w, req.WithContext(ctx))
			cancel()
		}
	}
	benchratio.Run(b, "route", serve(tracked), serve(bare), benchratio.BaselineName("bare"))
}

// discard is a ResponseWriter that keeps nothing.
type discard struct{ header http.Header }

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}
