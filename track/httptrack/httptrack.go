// Package httptrack begins a tensorlife request for each HTTP request a
// route serves, labelled with the route's pattern, and ends it when the
// handler returns: the route is then a request kind (track.RequestKinds
// with RouteKey) with no code in the handler, and each request's peak and
// what outlived it are known the moment it is answered.
//
// http.ServeMux sets Request.Pattern inside its own ServeHTTP, after the
// handler around the mux has run, so the wrapper goes around each route's
// handler, not around the mux:
//
//	mux.Handle("POST /generate", httptrack.Route(generate))
//	httptrack.Handle(mux, "GET /healthz", health) // the same, registered
//
// A gRPC server does the same in a unary interceptor: begin with
// track.BeginRequest(ctx, "route", info.FullMethod), defer the end, call
// the handler.
package httptrack

import (
	"context"
	"net/http"

	"github.com/tensorlife/tensorlife/track"
)

// RouteKey is the label key Route labels requests with.
const RouteKey = "route"

// Route returns a handler that serves each request with h under a tensorlife
// request of its own (track.BeginRequest on the request's context),
// labelled RouteKey=the pattern the mux matched (Request.Pattern; none
// outside a mux), and ends it when h
// returns, before net/http cancels the request's context (or when that
// context is done first). A tensor made under it and still live then has
// outlived its request. It starts no
// goroutine; a nil h is http.NotFoundHandler.
func Route(h http.Handler) http.Handler {
	if h == nil {
		h = http.NotFoundHandler()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ctx context.Context
		var end func()
		if r.Pattern != "" {
			ctx, end = track.BeginRequest(r.Context(), RouteKey, r.Pattern)
		} else {
			ctx, end = track.BeginRequest(r.Context())
		}
		defer end()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// Handle registers Route(h) for pattern on mux. As mux.Handle, it panics
// on a pattern the mux cannot parse or has registered already: a
// registration is the program's, fixed where it is written.
func Handle(mux *http.ServeMux, pattern string, h http.Handler) { mux.Handle(pattern, Route(h)) }

// HandleFunc registers Route(f) for pattern on mux, as Handle; a nil f is
// http.NotFound.
func HandleFunc(mux *http.ServeMux, pattern string, f func(http.ResponseWriter, *http.Request)) {
	if f == nil {
		f = http.NotFound
	}
	mux.Handle(pattern, Route(http.HandlerFunc(f)))
}
