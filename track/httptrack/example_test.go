package httptrack_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/httptrack"
)

func Example() {
	tr, _ := track.New(track.RequestKinds(httptrack.RouteKey))
	mux := http.NewServeMux()
	httptrack.HandleFunc(mux, "POST /generate", func(w http.ResponseWriter, r *http.Request) {
		kv := &track.Record{Bytes: 1 << 20, Meta: track.InternMeta("kv-cache", "host", "", nil)}
		_ = tr.Books().Record(r.Context(), kv, 0) // the request's KV cache
		_ = kv.Release()
	})
	mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/generate", nil))
	for _, k := range tr.RequestCosts() {
		fmt.Println(k.Kind, k.Requests, k.PeakMax)
	}
	// Output: route=POST /generate 1 1048576
}
