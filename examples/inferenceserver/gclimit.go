package main

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// gcEvery is how often the debug listener lets a client force a garbage
// collection (gc=1): net/http/pprof's heap profile and the tensors
// profile both run runtime.GC for it, which stops the world's work for
// every request the server is running. Once per ten seconds is enough to
// make dropped tensors show up in a profile, and not enough for a client
// to turn it into load.
const gcEvery = 10 * time.Second

// gcLimiter admits at most one request that forces a collection per
// interval, across the debug listener. It is safe for concurrent use.
type gcLimiter struct {
	every time.Duration
	now   func() time.Time // the clock; tests set it

	mu   sync.Mutex
	last time.Time // when the last forced collection was admitted
}

// admit reports whether a forced collection may run now, or how long until
// one may.
func (l *gcLimiter) admit() (wait time.Duration, ok bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() {
		if wait := l.last.Add(l.every).Sub(now); wait > 0 {
			return wait, false
		}
	}
	l.last = now
	return 0, true
}

// wrap answers a request that asks for a collection beyond the limit with
// 429 Too Many Requests and Retry-After, and passes every other request to
// next.
func (l *gcLimiter) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if asksForGC(r) {
			if wait, ok := l.admit(); !ok {
				secs := int64((wait + time.Second - 1) / time.Second)
				w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
				http.Error(w, fmt.Sprintf("gc=1 forces a garbage collection, which this listener runs at most once every %v; retry in %ds, or leave gc out",
					l.every, secs), http.StatusTooManyRequests)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// asksForGC reports whether r asks its handler to run runtime.GC: a gc
// parameter, in the query or a form body, that net/http/pprof (an integer
// above 0) or pprofexport (a true boolean) reads so.
func asksForGC(r *http.Request) bool {
	_ = r.ParseForm() // what could be parsed is in r.Form; the handler reports the rest
	for _, v := range r.Form["gc"] {
		if b, err := strconv.ParseBool(v); err == nil && b {
			return true
		}
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			return true
		}
	}
	return false
}
