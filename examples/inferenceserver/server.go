package main

import (
	"context"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tensorlife/tensorlife/mask"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/pprofexport"
	"github.com/tensorlife/tensorlife/report"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/devflag"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/httptrack"
	"github.com/tensorlife/tensorlife/track/watch"
)

// errShutDown means Shutdown was called a second time.
var errShutDown = errors.New("server already shut down")

// server is the inference service: a device, a tracker, a pool with a
// budget over the device, a mask builder and a bounded prompt-mask cache
// over the pool, a growth watcher ticked once per request, and the metrics
// and profile endpoints that show all of it.
//
// It has two listeners. The public one serves /generate and a health
// check, nothing else; the debug one (-debug-addr, loopback by default)
// serves the profiles, net/http/pprof, the memory summary and the metrics,
// which say more about the process than its clients should learn.
//
// Build it with newServer, serve with Serve, stop with Shutdown. Its methods
// are safe for concurrent use.
type server struct {
	cfg    config
	log    *slog.Logger
	report io.Writer // where Shutdown writes the memory summary

	// The host devices or GPUs (-device), one lane each, all on one
	// tracker: everything below takes any tensor.Device. Requests take the
	// lanes in turn (next).
	lanes   []*lane
	next    atomic.Uint64
	tr      *track.Tracker
	watcher *watch.Watcher
	tel     *telemetry
	profile http.Handler // the live-tensor profile
	http    *http.Server // the public listener's
	debug   *http.Server // the debug listener's

	// Request contexts derive from contexts these cancel, so Shutdown can
	// end what is still running: debug requests at once (a delta profile
	// waits for minutes), /generate requests when the drain runs out.
	cancelPublic, cancelDebug context.CancelFunc
	debugActive               atomic.Int64 // debug requests running

	// admit holds one token per /generate request doing tensor work: the
	// budget is sized for cfg.maxInFlight of the largest request at once
	// (config.validate), and a request beyond them is refused, not queued.
	admit chan struct{}
	// largest is the reservation of a request kind without history under
	// -admission: the largest request the bounds allow.
	largest int64
	refused atomic.Int64 // /generate requests admission refused

	// leaked is the seed's bug, present only with -leak: every decode
	// step's mask, kept under a key no one ever deletes.
	leaked *leakMap

	inflight gate         // /generate handlers running, so Shutdown can wait for them
	admitted atomic.Int64 // /generate requests admitted to tensor work, for the shutdown log
	gc       *gcLimiter   // how often a debug request may force a collection (gc=1)

	mu           sync.Mutex
	firstSuspect *watch.Suspect // the first site the watcher flagged
	shutDown     bool
}

// newServer builds a server from cfg, logging to logger and writing its
// shutdown summary to report. It listens nowhere until Serve.
func newServer(cfg config, logger *slog.Logger, report io.Writer) (*server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &server{cfg: cfg, log: logger, report: report, gc: &gcLimiter{every: gcEvery, now: time.Now}}
	devs, err := devflag.OpenAll(cfg.device, cfg.capacity)
	if err != nil {
		return nil, err
	}
	// A request's kind is its route (httptrack labels it): the summary
	// and the metrics show what each route's requests hold at their peak.
	if s.tr, err = track.New(track.Name("inferenceserver"), track.Logger(logger),
		track.RequestKinds(httptrack.RouteKey)); err != nil {
		return nil, errors.Join(err, devflag.CloseAll(devs))
	}
	for _, dev := range devs {
		l, err := newLane(cfg, logger, s.tr, dev, len(devs) > 1)
		if err != nil {
			return nil, errors.Join(err, s.closeLanes(), devflag.CloseAll(devs[len(s.lanes)+1:])) // newLane closed its own
		}
		s.lanes = append(s.lanes, l)
	}
	// One window per request (the default): a site whose memory outlives
	// most of the last 8 requests is named within a few. Each request is
	// begun by httptrack.Route around the route's handler and ended when
	// the handler returns, so what a request still holds in flight,
	// however many run at once and however long, is never judged.
	// A suspect whose memory ran out stays one, and the watcher says so in
	// the server's log.
	s.watcher, err = watch.New(s.tr, watch.WarmUp(cfg.watchAfter), watch.OnSuspect(s.onSuspect)) // it logs through the tracker's logger
	if err != nil {
		return nil, err
	}
	s.tel, err = newTelemetry(s.tr)
	if err != nil {
		return nil, err
	}
	// The profiles show each tensor's route and request id, so that
	// ?open=1 says which requests hold the memory. Only the debug listener
	// (loopback by default) serves them: request ids are no secret here.
	if s.profile, err = pprofexport.NewHandler(s.tr, pprofexport.LabelKeys(httptrack.RouteKey, requestKey)); err != nil {
		return nil, err
	}
	if cfg.leak {
		s.leaked = &leakMap{masks: make(map[string]*tensor.Tensor)}
	}
	s.admit = make(chan struct{}, cfg.maxInFlight)
	s.largest = requestBytes(cfg.maxPrompt, cfg.maxTokens, cfg.maxBatch)
	var publicCtx, debugCtx context.Context
	publicCtx, s.cancelPublic = context.WithCancel(context.Background())
	debugCtx, s.cancelDebug = context.WithCancel(context.Background())
	errorLog := slog.NewLogLogger(logger.Handler(), slog.LevelWarn)
	s.http = newHTTPServer(publicCtx, s.Handler(), errorLog)
	// The profile handlers move the debug listener's write deadline past a
	// delta window (?seconds=N); the tensors profile caps the window at 5
	// minutes.
	s.debug = newHTTPServer(debugCtx, s.DebugHandler(), errorLog)
	return s, nil
}

// newHTTPServer returns a server for h whose requests' contexts derive from
// ctx, so that cancelling ctx ends the requests in flight.
func newHTTPServer(ctx context.Context, h http.Handler, errorLog *log.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ReadHeaderTimeout: 5 * time.Second,
		// WriteTimeout bounds how long a slow client holds a response.
		WriteTimeout: 60 * time.Second,
		IdleTimeout:  2 * time.Minute,
		ErrorLog:     errorLog,
	}
}

// Handler returns the public listener's routes, all a client may reach:
//
//	POST /generate     run the decode loop (see parseGenerate); other methods get 405
//	GET /healthz       200 "ok" while serving, 503 once shutdown has begun
func (s *server) Handler() http.Handler {
	mux := http.NewServeMux()
	// Each route's handler is wrapped, not the mux: ServeMux sets the
	// pattern the wrapper labels with inside its own ServeHTTP.
	httptrack.HandleFunc(mux, "POST /generate", s.serveGenerate)
	httptrack.HandleFunc(mux, "GET /healthz", s.serveHealth)
	return mux
}

// DebugHandler returns the debug listener's routes, mounted one by one
// (importing net/http/pprof also registers it on http.DefaultServeMux,
// which nothing here serves):
//
//	GET /debug/pprof/             net/http/pprof: index, heap, goroutine, profile, trace, ...
//	GET /debug/pprof/tensors      live tensors as a pprof profile (pprofexport)
//	GET /debug/tensors/summary    the memory summary as text
//	GET /metrics                  OpenTelemetry metrics, Prometheus format
//
// A request that asks for a garbage collection first (gc=1, on the heap
// profile or the tensors profile) is admitted once every gcEvery; another
// gets 429 with Retry-After.
func (s *server) DebugHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/debug/pprof/tensors", s.profile)
	mux.HandleFunc("GET /debug/tensors/summary", s.serveSummary)
	mux.Handle("GET /metrics", s.tel.handler)
	limited := s.gc.wrap(mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.debugActive.Add(1)
		defer s.debugActive.Add(-1)
		limited.ServeHTTP(w, r)
	})
}

// Serve accepts connections on public and, unless it is nil, on debug,
// until Shutdown; it returns nil once Shutdown has begun, and otherwise the
// first error of either listener.
func (s *server) Serve(public, debug net.Listener) error {
	attrs := []any{slog.String("addr", public.Addr().String()), slog.Bool("leak", s.cfg.leak),
		slog.String("budget", report.Bytes(s.cfg.budget)), slog.Int("max_inflight", s.cfg.maxInFlight)}
	if debug != nil {
		attrs = append(attrs, slog.String("debug_addr", debug.Addr().String()))
	}
	s.log.Info("serving", attrs...)
	debugErr := make(chan error, 1)
	if debug != nil {
		go func() { debugErr <- s.debug.Serve(debug) }()
	} else {
		debugErr <- http.ErrServerClosed
	}
	err := s.http.Serve(public)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	} else {
		// The public listener failed: stop the debug one too, so this
		// returns and the caller can shut down.
		_ = s.debug.Close()
	}
	if derr := <-debugErr; !errors.Is(derr, http.ErrServerClosed) {
		err = errors.Join(err, derr)
	}
	return err
}

// serveHealth answers GET /healthz: 200 while the server admits requests,
// 503 once shutdown has begun, so a load balancer stops sending them.
func (s *server) serveHealth(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	down := s.shutDown
	s.mu.Unlock()
	if down {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ok\n")
}

// Shutdown stops the server gracefully, in an order that leaves nothing
// behind and reports what would have been:
//
//  1. end the debug requests at once, a pending delta profile among them
//     (their contexts are cancelled; each answers 503), and close the
//     debug listener;
//  2. stop accepting and drain the /generate requests in flight until ctx
//     is done; then cancel their contexts, so they stop at the next decode
//     step, and close their connections;
//  3. stop the watcher and close the prompt-mask cache, whose masks are
//     owned, not leaked;
//  4. report every tensor still live: memory that nothing will free. The
//     summary goes to the report writer and the top sites to the log, and
//     the returned error is a *liveTensorsError;
//  5. free what the leak map holds, stop the metrics, and close the pool,
//     which returns every block to the device (and would name any block
//     still handed out).
//
// A drain cut short is logged, not returned: the error, and so the exit
// status, says whether tensors were left live. A second call returns
// errShutDown.
func (s *server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.shutDown {
		s.mu.Unlock()
		return errShutDown
	}
	s.shutDown = true
	s.mu.Unlock()

	if n := s.debugActive.Load(); n > 0 {
		s.log.Info("ending debug requests", slog.Int64("running", n))
	}
	s.cancelDebug()
	if err := s.debug.Shutdown(ctx); err != nil {
		_ = s.debug.Close()
	}
	err := s.http.Shutdown(ctx)
	if err != nil {
		s.log.Warn("drain cut short: cancelling the requests still running", slog.Any("err", err))
	}
	s.cancelPublic()
	if err != nil {
		_ = s.http.Close()
	}
	var errs []error
	s.inflight.closeAndWait()
	errs = append(errs, s.watcher.Stop())
	for _, l := range s.lanes {
		errs = append(errs, l.prompts.Close())
	}

	live := s.tr.Totals()
	errs = append(errs, s.writeSummary(s.report))
	if live.LiveCount > 0 {
		err := s.liveError()
		s.log.Error("tensors still live at shutdown", slog.Int64("tensors", live.LiveCount),
			slog.String("bytes", report.Bytes(live.LiveBytes)), slog.String("top_site", err.topSite()))
		errs = append(errs, err)
	} else {
		s.log.Info("shut down: no tensor left live", slog.Int64("requests", s.admitted.Load()), slog.Int64("allocations", live.Allocs))
	}

	if s.leaked != nil {
		errs = append(errs, s.leaked.freeAll())
	}
	// The drain's deadline may have passed: the metrics get a moment of
	// their own to stop.
	telCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	errs = append(errs, s.tel.shutdown(telCtx), s.closeLanes())
	return errors.Join(errs...)
}

// writeSummary writes the memory summary with every source the server has.
func (s *server) writeSummary(w io.Writer) error {
	return report.WriteSummary(w, s.tr, report.TopSites(5))
}

// serveSummary answers GET /debug/tensors/summary.
func (s *server) serveSummary(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if err := s.writeSummary(w); err != nil {
		s.log.Warn("writing summary", slog.Any("err", err))
	}
}

// tick ends the watcher's window for one request. The request itself ends
// when its handler returns; what it left live is judged from the next
// window on.
func (s *server) tick() {
	// Tick fails only after Stop, which waits for every handler to leave.
	_ = s.watcher.Tick()
}

// onSuspect is the watcher's callback: it runs on the request goroutine that
// ended the window, so it only logs and remembers. An owner over its byte
// bound is no leak, and is said as what it is.
func (s *server) onSuspect(sus watch.Suspect) {
	if sus.IsOwner() {
		first := "unknown"
		if sus.OwnerFirst != nil {
			first = sus.OwnerFirst.String()
		}
		s.log.Warn("owner over its bound: it holds more than its MaxBytes",
			slog.String("owner", sus.Owner),
			slog.String("holds", report.Bytes(sus.OutlivedBytes)),
			slog.String("max_bytes", report.Bytes(sus.OwnerMaxBytes)),
			slog.Int64("tensors", sus.OutlivedCount),
			slog.String("first_handed_at", first),
			slog.String("advice", watch.OwnerAdvice))
		return
	}
	if sus.IsHandle() {
		s.log.Warn("handle outlived its request: taken under the request at this line, still held after it ended",
			slog.String("site", sus.Site.String()),
			slog.Int64("handles", sus.Handles),
			slog.String("holds", report.Bytes(sus.OutlivedBytes)),
			slog.String("advice", watch.HandleAdvice))
		return
	}
	s.log.Warn("leak suspect: bytes that outlived their request keep growing at one call site",
		slog.String("site", sus.Site.String()),
		slog.String("growth_per_request", report.Bytes(sus.GrowthPerWindow)),
		slog.String("outlived", report.Bytes(sus.OutlivedBytes)),
		slog.String("live", report.Bytes(sus.LiveBytes)),
		slog.Int64("tensors", sus.LiveCount),
		slog.Duration("runs_out_in", sus.RunsOutIn),
		slog.String("runs_out_of", runsOutOf(sus)),
		slog.String("advice", watch.Advice),
		slog.String("stack", sus.Site.Stack("")))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.firstSuspect == nil {
		s.firstSuspect = &sus
	}
}

// runsOutOf says what a suspect's forecast runs out of, as the watcher's
// own log line does ("pool budget on host"); empty while it has none.
func runsOutOf(sus watch.Suspect) string {
	if sus.RunsOutIn == 0 {
		return ""
	}
	return sus.HeadroomOf + " on " + sus.Device
}

// suspect returns the first site the watcher flagged, or nil.
func (s *server) suspect() *watch.Suspect {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.firstSuspect
}

// gate counts the handlers running and, once closed, admits no more, so
// that Shutdown frees nothing a handler still uses. It is safe for
// concurrent use.
type gate struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// enter admits one handler, or reports false after closeAndWait began.
func (g *gate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	return true
}

// leave ends a handler that enter admitted.
func (g *gate) leave() { g.wg.Done() }

// closeAndWait admits no more handlers and waits for those running.
func (g *gate) closeAndWait() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}

// lane is one device's share of the server: the device, a pool with the
// budget over it, a mask builder and a bounded prompt-mask cache over the
// pool (a mask serves only the device that holds it).
type lane struct {
	dev     devflag.Device
	pool    *pool.Pool
	masks   *mask.Builder
	prompts *mask.Cache
}

// newLane builds dev's pool, mask builder and prompt-mask cache on tr. With
// several devices the cache's name says its device. On error dev is closed.
func newLane(cfg config, logger *slog.Logger, tr *track.Tracker, dev devflag.Device, several bool) (_ *lane, err error) {
	l := &lane{dev: dev}
	defer func() {
		if err != nil {
			err = errors.Join(err, l.close())
		}
	}()
	if l.pool, err = pool.New(dev, pool.Tracker(tr), pool.Budget(cfg.budget)); err != nil {
		return nil, err
	}
	// Float32 additive masks, as attention kernels add them to scores.
	l.masks, err = mask.NewBuilder(l.pool, mask.DType(tensor.Float32),
		mask.MaxLength(cfg.maxPrompt+cfg.maxTokens)) // its rebuild report logs through the tracker's logger
	if err != nil {
		return nil, err
	}
	name := "prompt-masks"
	if several {
		name = "prompts@" + dev.Name() // short: the summary shows 16 columns of a name
	}
	l.prompts, err = mask.NewCache(mask.CacheTracker(tr), mask.CacheName(name), mask.MaxBytes(cfg.cache), mask.MaxEntries(64))
	return l, err
}

// close gives the lane's pool back to its device and closes the device.
func (l *lane) close() error {
	var errs []error
	if l.pool != nil {
		errs = append(errs, l.pool.Close())
	}
	return errors.Join(append(errs, l.dev.Close())...)
}

// closeLanes closes every lane's pool and device.
func (s *server) closeLanes() error {
	var errs []error
	for _, l := range s.lanes {
		errs = append(errs, l.close())
	}
	return errors.Join(errs...)
}

// stepEnded is the step hookStep sees when a request has ended (or was
// refused).
const stepEnded = -1

// step calls the test's hook, if any, at a decode step of the request of
// ctx, or with stepEnded.
func (s *server) step(ctx context.Context, step int) {
	if s.cfg.hookStep != nil {
		s.cfg.hookStep(ctx, step)
	}
}

// nextLane returns the lane the next request runs on: round-robin.
func (s *server) nextLane() *lane {
	return s.lanes[(s.next.Add(1)-1)%uint64(len(s.lanes))]
}

// rebuilds is how many masks were rebuilt, over every lane.
func (s *server) rebuilds() int64 {
	var n int64
	for _, l := range s.lanes {
		n += l.masks.Rebuilds()
	}
	return n
}
