package pprofexport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/pprof/profile"
	"github.com/tensorlife/tensorlife/track"
)

// handler serves a tracker's live tensors; see NewHandler.
type handler struct {
	tracker *track.Tracker
	cfg     config
}

// Handler returns an http.Handler that serves tr's live tensors as a pprof
// profile, in the manner of net/http/pprof; a nil tr serves track.Default().
// Nothing is registered anywhere: mount it yourself, under the path your
// scraper is told about,
//
//	mux.Handle("/debug/pprof/tensors", pprofexport.Handler(tracker))
//
// and keep it off public listeners, as you would net/http/pprof. See the
// package documentation for the query parameters; NewHandler takes options.
func Handler(tr *track.Tracker) http.Handler {
	if tr == nil {
		tr = track.Default()
	}
	return &handler{tracker: tr, cfg: config{scope: scopeHandler}}
}

// NewHandler returns a handler as Handler does, configured by opts:
// WithFilter sets the filter every answer starts from, KeepLibraryFrames
// keeps tensorlife's frames in the stacks. A nil tracker is an error
// matching ErrNilTracker, an invalid option one matching ErrInvalidOption.
// The handler is safe for concurrent use.
func NewHandler(tr *track.Tracker, opts ...Option) (http.Handler, error) {
	if tr == nil {
		return nil, ErrNilTracker
	}
	cfg, err := newConfig(scopeHandler, opts)
	if err != nil {
		return nil, err
	}
	return &handler{tracker: tr, cfg: cfg}, nil
}

// query is a parsed request.
type query struct {
	filter  track.Filter
	debug   int
	seconds int64
	gc      bool
}

// maxSeconds is the longest delta whose duration fits a time.Duration.
const maxSeconds = int64(math.MaxInt64 / time.Second)

// knownParams are the query parameters the handler reads; any other is
// refused, so that a misspelt filter is an error, not a silently larger
// profile.
var knownParams = []string{"debug", "seconds", "min_age", "kind", "leaked", "gc"}

func (h *handler) parse(r *http.Request) (query, error) {
	q := query{filter: h.cfg.filter}
	values, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return q, fmt.Errorf("malformed query: %v", err)
	}
	for name, v := range values {
		if !slices.Contains(knownParams, name) {
			return q, fmt.Errorf("unknown parameter %q (known: %s)", name, strings.Join(knownParams, ", "))
		}
		if len(v) > 1 {
			return q, fmt.Errorf("parameter %q given %d times", name, len(v))
		}
	}
	if s := values.Get("debug"); s != "" {
		if q.debug, err = strconv.Atoi(s); err != nil || q.debug < 0 {
			return q, fmt.Errorf(`invalid value for "debug": %q, want 0 (profile) or 1 (text)`, s)
		}
	}
	if s := values.Get("seconds"); s != "" {
		if q.seconds, err = strconv.ParseInt(s, 10, 64); err != nil || q.seconds <= 0 || q.seconds > maxSeconds {
			return q, fmt.Errorf(`invalid value for "seconds": %q, want a positive integer`, s)
		}
		if q.debug != 0 {
			return q, errors.New(`"seconds" and "debug" cannot be combined`)
		}
	}
	if s := values.Get("min_age"); s != "" {
		if q.filter.MinAge, err = time.ParseDuration(s); err != nil || q.filter.MinAge < 0 {
			return q, fmt.Errorf(`invalid value for "min_age": %q, want a duration such as 30s or 5m`, s)
		}
	}
	if values.Has("kind") {
		q.filter.Kind = values.Get("kind")
	}
	if s := values.Get("leaked"); s != "" {
		if q.filter.LeakedOnly, err = strconv.ParseBool(s); err != nil {
			return q, fmt.Errorf(`invalid value for "leaked": %q, want true or false`, s)
		}
	}
	if s := values.Get("gc"); s != "" {
		if q.gc, err = strconv.ParseBool(s); err != nil {
			// net/http/pprof reads gc=1 as a number; accept any integer too.
			n, nerr := strconv.Atoi(s)
			if nerr != nil {
				return q, fmt.Errorf(`invalid value for "gc": %q, want true or false`, s)
			}
			q.gc = n > 0
		}
	}
	return q, nil
}

// ServeHTTP answers with the profile, the text table or the delta profile.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		serveError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed; use GET")
		return
	}
	q, err := h.parse(r)
	if err != nil {
		serveError(w, http.StatusBadRequest, err.Error())
		return
	}
	if q.seconds > 0 && exceedsWriteTimeout(r, q.seconds) {
		serveError(w, http.StatusBadRequest, `"seconds" exceeds the server's WriteTimeout`)
		return
	}
	start, err := h.snapshot(q)
	if err != nil {
		serveError(w, http.StatusBadRequest, err.Error())
		return
	}
	var body bytes.Buffer
	switch {
	case q.debug > 0:
		err = WriteText(&body, start, h.profileOptions()...)
		if err == nil {
			writeBody(w, "text/plain; charset=utf-8", "", body.Bytes())
		}
	case q.seconds > 0:
		var end *track.Snapshot
		end, err = h.wait(r.Context(), q, time.Duration(q.seconds)*time.Second)
		if err != nil {
			serveWaitError(w, err)
			return
		}
		var p *profile.Profile
		if p, err = DeltaProfile(start, end, h.profileOptions()...); err == nil {
			err = h.writeProfile(w, &body, p, "tensors-delta")
		}
	default:
		var p *profile.Profile
		if p, err = Profile(start, h.profileOptions()...); err == nil {
			err = h.writeProfile(w, &body, p, "tensors")
		}
	}
	if err != nil {
		serveError(w, http.StatusInternalServerError, err.Error())
	}
}

func (h *handler) profileOptions() []Option {
	return []Option{KeepLibraryFrames(h.cfg.keepLibrary)}
}

// snapshot takes the snapshot a query asks for.
func (h *handler) snapshot(q query) (*track.Snapshot, error) {
	if q.gc {
		runtime.GC()
	}
	return h.tracker.SnapshotOf(q.filter)
}

// wait takes the second snapshot of a delta after d, or gives up when the
// request ends first.
func (h *handler) wait(ctx context.Context, q query, d time.Duration) (*track.Snapshot, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
	}
	return h.snapshot(q)
}

// writeProfile encodes p into buf first, so an encoding failure can still
// be answered with an error status, then sends it.
func (h *handler) writeProfile(w http.ResponseWriter, buf *bytes.Buffer, p *profile.Profile, name string) error {
	if err := encode(buf, p); err != nil {
		return err
	}
	writeBody(w, "application/octet-stream", name, buf.Bytes())
	return nil
}

func writeBody(w http.ResponseWriter, contentType, attachment string, body []byte) {
	hd := w.Header()
	hd.Set("Content-Type", contentType)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	if attachment != "" {
		hd.Set("Content-Disposition", `attachment; filename="`+attachment+`"`)
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body) // the client has gone; nothing left to tell it
}

// exceedsWriteTimeout reports whether a delta of seconds would outlast the
// serving http.Server's WriteTimeout, which would cut the answer off.
func exceedsWriteTimeout(r *http.Request, seconds int64) bool {
	srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server)
	return ok && srv.WriteTimeout > 0 && float64(seconds) >= srv.WriteTimeout.Seconds()
}

// serveWaitError answers a delta window that ended early. The request's
// context is cancelled when the client leaves, but also by the server
// (shutdown, a middleware's deadline): a client still there must get an
// error, never an empty 200 that pprof fails to parse. Writing to a client
// that left is harmless.
func serveWaitError(w http.ResponseWriter, err error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		serveError(w, http.StatusServiceUnavailable, "pprofexport: delta window interrupted: "+err.Error())
		return
	}
	serveError(w, http.StatusInternalServerError, err.Error())
}

// serveError answers with a plain-text message. X-Go-Pprof makes
// go tool pprof print the message instead of only the status.
func serveError(w http.ResponseWriter, status int, msg string) {
	hd := w.Header()
	hd.Set("Content-Type", "text/plain; charset=utf-8")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Go-Pprof", "1")
	hd.Del("Content-Disposition")
	w.WriteHeader(status)
	fmt.Fprintln(w, "pprofexport: "+msg)
}
