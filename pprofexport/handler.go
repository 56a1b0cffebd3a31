package pprofexport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/tensorlife/tensorlife/internal/option"
	"github.com/tensorlife/tensorlife/track"
)

// handler serves a tracker's live tensors; see NewHandler.
type handler struct {
	tracker *track.Tracker
	cfg     config
	// deltas holds one token per delta profile in progress, profiles one
	// per profile or text table of one snapshot.
	deltas, profiles chan struct{}
	// lastGC is when ?gc=1 last forced a collection, in nanoseconds of
	// the handler's clock; 0 before the first.
	lastGC atomic.Int64
}

// Bounds of MaxConcurrentProfiles.
const (
	// DefaultMaxConcurrentProfiles is how many profiles of the live set
	// (and ?debug=1 tables) a handler computes at once unless
	// MaxConcurrentProfiles says otherwise: one per scraper and a few for
	// people. Each holds a snapshot and its profile while it is built.
	DefaultMaxConcurrentProfiles = 4

	maxConcurrentProfiles = 256

	// GCInterval is the least time between two collections that ?gc=1
	// forces: a forced collection stops every goroutine of the service
	// for a moment and costs a full mark, so a client that asks for one
	// on every request must not get one on every request. A ?gc=1 sooner
	// than this after the last forced one is served without forcing one:
	// the collection of moments ago found what it could.
	GCInterval = 10 * time.Second

	// maxEchoBytes bounds how much of a value from the request an error
	// answer quotes: enough to recognize it, not a hostile 100 KB echoed
	// whole.
	maxEchoBytes = 64
)

// MaxConcurrentProfiles sets how many profiles of the live set, binary or
// text (?debug=1), a handler computes at once; a request beyond it is
// answered 429 Too Many Requests at once, holding nothing, with a
// Retry-After header and a text that states the limit. Each profile in
// progress holds a snapshot and the profile built from it, so this bounds
// the memory and CPU that scrapes can take, however many clients send
// them. Delta profiles (?seconds=N) have their own limit,
// MaxConcurrentDeltas, and do not count against this one. Default
// DefaultMaxConcurrentProfiles (4); between 0 and 256, where 0 serves
// delta profiles only (every other request is answered 400); with
// MaxConcurrentDeltas(0) too, NewHandler refuses the pair.
func MaxConcurrentProfiles(n int) HandlerOption {
	return handlerOption(option.Within("MaxConcurrentProfiles", n, 0, maxConcurrentProfiles, func(c *config, n int) { c.maxProfiles = n }))
}

// NewHandler returns an http.Handler that serves tr's live tensors as a
// pprof profile, in the manner of net/http/pprof. Nothing is registered
// anywhere: mount it yourself, under the path your scraper is told about,
//
//	h, err := pprofexport.NewHandler(tracker)
//	...
//	debugMux.Handle("/debug/pprof/tensors", h)
//
// and keep it off public listeners, as you would net/http/pprof. See the
// package documentation for the query parameters. Options: Filter sets
// the filter every answer starts from, LabelKeys the request labels a
// profile may show (none by default), MaxConcurrentProfiles bounds the
// profiles computed at once, MaxDeltaWindow and MaxConcurrentDeltas bound
// the delta profiles, KeepLibraryFrames keeps tensorlife's frames in the
// stacks.
//
// A nil tracker is an error matching track.ErrNilTracker, an invalid option
// one matching ErrInvalidOption, as is turning both kinds of profile off
// (MaxConcurrentProfiles(0) with MaxConcurrentDeltas(0)), which leaves
// nothing to serve. The handler is safe for concurrent use.
func NewHandler(tr *track.Tracker, opts ...HandlerOption) (http.Handler, error) {
	if tr == nil {
		return nil, track.ErrNilTracker
	}
	cfg, err := newHandlerConfig(opts)
	if err != nil {
		return nil, err
	}
	if cfg.maxProfiles == 0 && cfg.maxDeltas == 0 {
		return nil, fmt.Errorf("%w: MaxConcurrentProfiles(0) with MaxConcurrentDeltas(0): the handler could answer nothing",
			ErrInvalidOption)
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	return &handler{tracker: tr, cfg: cfg, deltas: make(chan struct{}, cfg.maxDeltas),
		profiles: make(chan struct{}, cfg.maxProfiles)}, nil
}

// query is a parsed request.
type query struct {
	filter  track.Filter
	debug   int
	seconds int64
	gc      bool
}

// param returns the value of a query parameter. Parameters other than the
// handler's are ignored, as net/http/pprof ignores them: scrapers add their
// own to every target. A parameter repeated with one value is that value
// (Parca and Grafana Alloy may send seconds twice); with different values
// it is refused, since either reading could be wrong.
func param(values url.Values, name string) (string, error) {
	vs := values[name]
	if len(vs) == 0 {
		return "", nil
	}
	for _, v := range vs[1:] {
		if v != vs[0] {
			return "", fmt.Errorf("parameter %s given different values: %s and %s", echo(name), echo(vs[0]), echo(v))
		}
	}
	return vs[0], nil
}

// parse reads the request's query. Its error refuses the request: the
// handler answers 400 Bad Request with the error's text.
func (h *handler) parse(r *http.Request) (query, error) {
	q := query{filter: h.cfg.filter}
	values, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return q, fmt.Errorf("malformed query: %s", echoError(err))
	}
	get := func(name string) string {
		if err != nil {
			return ""
		}
		var v string
		v, err = param(values, name)
		return v
	}
	debug, seconds, minAge, leaked, gc := get("debug"), get("seconds"), get("min_age"), get("leaked"), get("gc")
	kind, outlived, device, open := get("kind"), get("outlived"), get("device"), get("open")
	if err != nil {
		return q, err
	}
	switch debug {
	case "", "0":
	case "1":
		q.debug = 1
	default:
		return q, fmt.Errorf(`invalid value for "debug": %s, want 0 (profile) or 1 (text)`, echo(debug))
	}
	if seconds != "" {
		if q.seconds, err = strconv.ParseInt(seconds, 10, 64); err != nil || q.seconds <= 0 {
			return q, fmt.Errorf(`invalid value for "seconds": %s, want a positive integer`, echo(seconds))
		}
		if q.debug != 0 {
			return q, errors.New(`"seconds" and "debug" cannot be combined`)
		}
		limit := int64(h.cfg.maxDeltaWindow / time.Second)
		switch {
		case h.cfg.maxDeltas == 0:
			return q, errors.New(`delta profiles ("seconds") are turned off on this endpoint (MaxConcurrentDeltas(0))`)
		case q.seconds > limit:
			return q, fmt.Errorf(`"seconds"=%d is longer than this endpoint's longest delta window, %d seconds (MaxDeltaWindow)`,
				q.seconds, limit)
		}
	}
	if minAge != "" {
		if q.filter.MinAge, err = time.ParseDuration(minAge); err != nil || q.filter.MinAge < 0 {
			return q, fmt.Errorf(`invalid value for "min_age": %s, want a duration such as 30s or 5m`, echo(minAge))
		}
	}
	switch outlived {
	case "":
	case "0", "false":
		q.filter.Outlived = false
	case "1", "true":
		q.filter.Outlived = true
	default:
		return q, fmt.Errorf(`invalid value for "outlived": %s, want 1 (only tensors that outlived their request) or 0`, echo(outlived))
	}
	switch open {
	case "":
	case "0", "false":
		q.filter.InFlight = false
	case "1", "true":
		q.filter.InFlight = true
	default:
		return q, fmt.Errorf(`invalid value for "open": %s, want 1 (only tensors open requests hold in flight) or 0`, echo(open))
	}
	if q.filter.InFlight && q.filter.Outlived {
		return q, errors.New(`"open" and "outlived" cannot be combined: a tensor is in flight or outlived its request`)
	}
	if values.Has("kind") {
		q.filter.Kind = kind
	}
	if values.Has("device") {
		q.filter.Device = device
	}
	if leaked != "" {
		if q.filter.LeakedOnly, err = strconv.ParseBool(leaked); err != nil {
			return q, fmt.Errorf(`invalid value for "leaked": %s, want true or false`, echo(leaked))
		}
	}
	if gc != "" {
		if q.gc, err = strconv.ParseBool(gc); err != nil {
			// net/http/pprof reads gc=1 as a number; accept any integer too.
			n, nerr := strconv.Atoi(gc)
			if nerr != nil {
				return q, fmt.Errorf(`invalid value for "gc": %s, want true or false`, echo(gc))
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
		method := r.Method // a token, never quoted unless too long to echo
		if len(method) > maxEchoBytes {
			method = echo(method)
		}
		serveError(w, http.StatusMethodNotAllowed, "method "+method+" not allowed; use GET")
		return
	}
	q, err := h.parse(r)
	if err != nil {
		serveError(w, http.StatusBadRequest, err.Error())
		return
	}
	if q.seconds > 0 {
		h.serveDelta(w, r, q)
		return
	}
	if h.cfg.maxProfiles == 0 {
		serveError(w, http.StatusBadRequest,
			`profiles of the live set are turned off on this endpoint (MaxConcurrentProfiles(0)); ask for a delta profile ("seconds")`)
		return
	}
	select {
	case h.profiles <- struct{}{}:
		defer func() { <-h.profiles }()
	default:
		w.Header().Set("Retry-After", "1")
		serveError(w, http.StatusTooManyRequests, fmt.Sprintf(
			"too many profiles in progress: this endpoint computes at most %d at once (MaxConcurrentProfiles); retry later",
			h.cfg.maxProfiles))
		return
	}
	if q.debug > 0 {
		snap, err := h.snapshot(q)
		if err != nil {
			serveError(w, http.StatusBadRequest, err.Error())
			return
		}
		var body bytes.Buffer
		if err = writeText(&body, snap, h.cfg); err == nil {
			writeBody(w, "text/plain; charset=utf-8", "", body.Bytes())
		} else {
			serveError(w, http.StatusInternalServerError, err.Error())
		}
		return
	}
	// The groups are read apart from the snapshot and each written as it
	// is read: a profile of a million request ids holds no Group of them.
	h.collect(q)
	snap, groups, err := h.tracker.Books().GroupsOf(h.filter(q))
	if err != nil {
		serveError(w, http.StatusBadRequest, err.Error())
		return
	}
	err = h.writeProfile(w, func(zw io.Writer) error { return streamGroups(zw, snap, groups.All(), h.cfg) }, "tensors")
	if err != nil {
		serveError(w, http.StatusInternalServerError, err.Error())
	}
}

// serveDelta answers ?seconds=N: the profile of the next N seconds.
func (h *handler) serveDelta(w http.ResponseWriter, r *http.Request, q query) {
	select {
	case h.deltas <- struct{}{}:
		defer func() { <-h.deltas }()
	default:
		hd := w.Header()
		hd.Set("Retry-After", strconv.FormatInt(q.seconds, 10))
		serveError(w, http.StatusTooManyRequests, fmt.Sprintf(
			"too many delta profiles in progress: this endpoint computes at most %d at once (MaxConcurrentDeltas); retry later",
			h.cfg.maxDeltas))
		return
	}
	window := time.Duration(q.seconds) * time.Second
	if err := extendWriteDeadline(w, r, window); err != nil {
		serveError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err := q.filter.Validate(); err != nil {
		serveError(w, http.StatusBadRequest, err.Error())
		return
	}
	h.collect(q)
	// Every value of a delta is a difference, in-use ones too: the start is
	// a snapshot like the end's, one walk of the live set, whose groups are
	// held for the window (as many as a plain scrape's profile has samples).
	start, err := h.tracker.SnapshotOf(q.filter)
	if err != nil {
		serveError(w, http.StatusBadRequest, err.Error())
		return
	}
	end, err := h.wait(r.Context(), q, window)
	if err != nil {
		serveWaitError(w, err)
		return
	}
	err = h.writeProfile(w, func(zw io.Writer) error { return streamPair(zw, start, end, "delta", h.cfg) },
		"tensors-delta")
	if err != nil {
		serveError(w, http.StatusInternalServerError, err.Error())
	}
}

// extendWriteDeadline moves the write deadline of a delta's answer past its
// window, as net/http/pprof does: the server's WriteTimeout counts from the
// request, and would cut off any window longer than itself. Where the
// deadline cannot be moved (a middleware's ResponseWriter that does not
// unwrap) and the window would outlast WriteTimeout, the request is
// refused with a text that states the limit.
func extendWriteDeadline(w http.ResponseWriter, r *http.Request, window time.Duration) error {
	srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server)
	if !ok || srv.WriteTimeout <= 0 {
		return nil
	}
	err := http.NewResponseController(w).SetWriteDeadline(time.Now().Add(srv.WriteTimeout + window))
	if err == nil || window < srv.WriteTimeout {
		return nil
	}
	return fmt.Errorf(`"seconds"=%d reaches the server's WriteTimeout of %v, which cannot be extended here (%v): ask for less than %v`,
		int64(window/time.Second), srv.WriteTimeout, err, srv.WriteTimeout)
}

// snapshot takes the snapshot a query asks for, its groups told apart by
// the label keys the endpoint shows alone: labels it does not show (a
// request id per tensor) cost it nothing.
func (h *handler) snapshot(q query) (*track.Snapshot, error) {
	h.collect(q)
	return h.tracker.SnapshotOf(h.filter(q))
}

// filter is the filter of the snapshot a query asks for (see snapshot).
func (h *handler) filter(q query) track.Filter {
	f := q.filter
	switch {
	case q.debug == 1:
		// The text view shows no label: grouped by none, it costs what
		// its rows do, whatever labels LabelKeys lets a profile show.
		f.LabelKeys = []string{}
	case !h.cfg.allLabels:
		f.LabelKeys = append([]string{}, h.cfg.labelKeys...) // not nil: these keys and no other
	}
	f.Oldest = q.debug == 1 // the text view prints ages: it walks
	return f
}

// collect runs the collection ?gc=1 asks for, unless one was forced less
// than GCInterval ago (see GCInterval): of the requests that race for it,
// one forces it and the others go on without.
func (h *handler) collect(q query) {
	if !q.gc {
		return
	}
	now := h.cfg.now().UnixNano()
	last := h.lastGC.Load()
	if last != 0 && now-last < int64(GCInterval) {
		return
	}
	if h.lastGC.CompareAndSwap(last, now) {
		runtime.GC()
	}
}

// echo quotes a value taken from the request for an error answer: whole
// when short, else its first maxEchoBytes bytes (cut at a character
// boundary) and how long it was, so that an answer never grows with
// what a client sends.
func echo(v string) string {
	if len(v) <= maxEchoBytes {
		return strconv.Quote(v)
	}
	n := maxEchoBytes
	for n > 0 && !utf8.RuneStart(v[n]) {
		n--
	}
	return strconv.Quote(v[:n]) + fmt.Sprintf("... (%d bytes)", len(v))
}

// echoError bounds the text of an error that may quote the request (the
// query parser's) as echo bounds a value.
func echoError(err error) string {
	msg := err.Error()
	if len(msg) <= 2*maxEchoBytes {
		return msg
	}
	n := 2 * maxEchoBytes
	for n > 0 && !utf8.RuneStart(msg[n]) {
		n--
	}
	return msg[:n] + fmt.Sprintf("... (%d bytes)", len(msg))
}

// wait takes the second snapshot of a delta after d, or gives up as soon
// as the request's context ends: the client left, a middleware's deadline
// passed, or the server is shutting down and cancelled it.
func (h *handler) wait(ctx context.Context, q query, d time.Duration) (*track.Snapshot, error) {
	window := h.cfg.window
	if window == nil {
		window = sleep
	}
	if err := window(ctx, d); err != nil {
		return nil, err
	}
	return h.snapshot(q)
}

// sleep waits d on the real clock, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// writeProfile compresses what write encodes into memory first, so an
// encoding failure can still be answered with an error status, then sends
// it.
func (h *handler) writeProfile(w http.ResponseWriter, write func(io.Writer) error, name string) error {
	var body chunks
	if err := compress(&body, write); err != nil {
		return err
	}
	setBodyHeaders(w, "application/octet-stream", name, body.size)
	for _, c := range body.list {
		if _, err := w.Write(c); err != nil {
			return nil // the client has gone; nothing left to tell it
		}
	}
	return nil
}

func writeBody(w http.ResponseWriter, contentType, attachment string, body []byte) {
	setBodyHeaders(w, contentType, attachment, len(body))
	_, _ = w.Write(body) // the client has gone; nothing left to tell it
}

// setBodyHeaders sends the status and headers of a body of size bytes.
func setBodyHeaders(w http.ResponseWriter, contentType, attachment string, size int) {
	hd := w.Header()
	hd.Set("Content-Type", contentType)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Length", strconv.Itoa(size))
	if attachment != "" {
		hd.Set("Content-Disposition", `attachment; filename="`+attachment+`"`)
	}
	w.WriteHeader(http.StatusOK)
}

// chunks holds what is written to it in blocks that are never copied: a
// compressed profile of megabytes costs its size, where a buffer that
// doubles costs about twice that.
type chunks struct {
	list [][]byte
	size int
}

// chunkBytes is the size of each block but the first ones, which grow to
// it so that a small profile takes little.
const chunkBytes = 256 << 10

func (c *chunks) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		last := len(c.list) - 1
		if last < 0 || len(c.list[last]) == cap(c.list[last]) {
			size := chunkBytes
			if last >= 0 && cap(c.list[last]) < chunkBytes {
				size = min(2*cap(c.list[last]), chunkBytes)
			} else if last < 0 {
				size = 4 << 10
			}
			c.list = append(c.list, make([]byte, 0, size))
			last++
		}
		b := c.list[last]
		k := min(len(p), cap(b)-len(b))
		c.list[last] = append(b, p[:k]...)
		p = p[k:]
	}
	c.size += n
	return n, nil
}

// serveWaitError answers a delta window that ended early. The request's
// context is cancelled when the client leaves, but also by the server
// (shutdown, a middleware's deadline): a client still there must get an
// error, never an empty 200 that pprof fails to parse. Writing to a client
// that left is harmless.
func serveWaitError(w http.ResponseWriter, err error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		serveError(w, http.StatusServiceUnavailable, "delta window interrupted: "+err.Error())
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
