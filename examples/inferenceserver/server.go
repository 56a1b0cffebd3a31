package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tensorlife/tensorlife/internal/devflag"
	"github.com/tensorlife/tensorlife/internal/format"
	"github.com/tensorlife/tensorlife/mask"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/pprofexport"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// watchHistory is how many requests the growth watcher remembers per site.
const watchHistory = 256

// errShutDown means Shutdown was called a second time.
var errShutDown = errors.New("server already shut down")

// server is the inference service: a device, a tracker, a pool with a
// budget over the device, a mask builder and a bounded prompt-mask cache
// over the pool, a growth watcher ticked once per request, and the metrics
// and profile endpoints that show all of it.
//
// Build it with newServer, serve with Serve, stop with Shutdown. Its methods
// are safe for concurrent use.
type server struct {
	cfg    config
	log    *slog.Logger
	report io.Writer // where Shutdown writes the memory summary

	// The host device or a GPU (-device): everything below takes any
	// tensor.Device.
	dev     devflag.Device
	tr      *track.Tracker
	pool    *pool.Pool
	masks   *mask.Builder
	prompts *mask.Cache
	watcher *track.Watcher
	tel     *telemetry
	profile http.Handler // the live-tensor profile
	http    *http.Server

	// leaked is the seed's bug, present only with -leak: every decode
	// step's mask, kept under a key no one ever deletes.
	leaked *leakMap

	requests atomic.Uint64 // numbers request ids
	inflight gate          // /generate handlers running, so Shutdown can wait for them

	mu           sync.Mutex
	firstSuspect *track.Suspect // the first site the watcher flagged
	shutDown     bool
}

// newServer builds a server from cfg, logging to logger and writing its
// shutdown summary to report. It listens nowhere until Serve.
func newServer(cfg config, logger *slog.Logger, report io.Writer) (*server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &server{cfg: cfg, log: logger, report: report}
	var err error
	if s.dev, err = devflag.Open(cfg.device, cfg.capacity); err != nil {
		return nil, err
	}
	if s.tr, err = track.New(track.WithName("inferenceserver"), track.WithLogger(logger)); err != nil {
		return nil, err
	}
	if s.pool, err = pool.New(s.dev, pool.WithTracker(s.tr), pool.Budget(cfg.budget)); err != nil {
		return nil, err
	}
	// Float32 additive masks, as attention kernels add them to scores.
	s.masks, err = mask.NewBuilder(s.pool, mask.WithDType(tensor.Float32),
		mask.MaxLength(cfg.maxPrompt+cfg.maxTokens), mask.WithLogger(logger))
	if err != nil {
		return nil, err
	}
	s.prompts, err = mask.NewCache(mask.CacheName("prompt-masks"), mask.MaxBytes(cfg.cache), mask.MaxEntries(64))
	if err != nil {
		return nil, err
	}
	// One window per request (the default), after the warm-up (see tick):
	// a site that keeps memory on most of the last 8 requests is named
	// within a few requests. The long history is for the sites that follow
	// the requests in flight: their memory climbs whenever the load does,
	// for as many requests as the climb lasts, but what they give back over
	// 256 requests outweighs any climb, while a leak gives nothing back.
	s.watcher, err = track.NewWatcher(s.tr, track.WarmUp(cfg.watchAfter), track.WatchHistory(watchHistory),
		track.OnSuspect(s.onSuspect))
	if err != nil {
		return nil, err
	}
	s.tel, err = newTelemetry(s.tr, s.sources())
	if err != nil {
		return nil, err
	}
	if s.profile, err = pprofexport.NewHandler(s.tr); err != nil {
		return nil, err
	}
	if cfg.leak {
		s.leaked = &leakMap{masks: make(map[string]*tensor.Tensor)}
	}
	s.http = &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		// WriteTimeout bounds how long a slow client holds a response. The
		// profile handler refuses a ?seconds= delta that would outlast it,
		// so it also caps delta profiles at 59 seconds.
		WriteTimeout: 60 * time.Second,
		IdleTimeout:  2 * time.Minute,
		ErrorLog:     slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	return s, nil
}

// Handler returns the server's routes:
//
//	GET|POST /generate            run the decode loop (see parseGenerate)
//	GET /debug/pprof/tensors      live tensors as a pprof profile
//	GET /debug/tensors/summary    the memory summary as text
//	GET /metrics                  OpenTelemetry metrics, Prometheus format
func (s *server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /generate", s.serveGenerate)
	mux.HandleFunc("POST /generate", s.serveGenerate)
	mux.Handle("/debug/pprof/tensors", s.profile)
	mux.HandleFunc("GET /debug/tensors/summary", s.serveSummary)
	mux.Handle("GET /metrics", s.tel.handler)
	return mux
}

// Serve accepts connections on ln until Shutdown; it returns nil once
// Shutdown has begun, and any other error of the listener.
func (s *server) Serve(ln net.Listener) error {
	s.log.Info("serving", slog.String("addr", ln.Addr().String()), slog.Bool("leak", s.cfg.leak),
		slog.String("budget", format.Bytes(s.cfg.budget)))
	if err := s.http.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Shutdown stops the server gracefully, in an order that leaves nothing
// behind and reports what would have been:
//
//  1. stop accepting and drain the requests in flight (until ctx is done;
//     then close their connections and wait for their handlers, which stop
//     at the next decode step);
//  2. stop the watcher and close the prompt-mask cache, whose masks are
//     owned, not leaked;
//  3. report every tensor still live: memory that nothing will free. The
//     summary goes to the report writer and the top sites to the log, and
//     the returned error is a *liveTensorsError;
//  4. free what the leak map holds, stop the metrics, and close the pool,
//     which returns every block to the device (and would name any block
//     still handed out).
//
// A second call returns errShutDown.
func (s *server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.shutDown {
		s.mu.Unlock()
		return errShutDown
	}
	s.shutDown = true
	s.mu.Unlock()

	var errs []error
	if err := s.http.Shutdown(ctx); err != nil {
		s.log.Warn("drain cut short; closing connections", slog.Any("err", err))
		errs = append(errs, fmt.Errorf("draining requests: %w", err), s.http.Close())
	}
	s.inflight.closeAndWait()
	errs = append(errs, s.watcher.Stop(), s.prompts.Close())

	live := s.tr.Totals()
	errs = append(errs, s.writeSummary(s.report))
	if live.LiveCount > 0 {
		err := s.liveError()
		s.log.Error("tensors still live at shutdown", slog.Int64("tensors", live.LiveCount),
			slog.String("bytes", format.Bytes(live.LiveBytes)), slog.String("top_site", err.topSite()))
		errs = append(errs, err)
	} else {
		s.log.Info("shut down: no tensor left live", slog.Int64("allocations", live.Allocs))
	}

	if s.leaked != nil {
		errs = append(errs, s.leaked.freeAll())
	}
	errs = append(errs, s.tel.shutdown(ctx), s.pool.Close(), s.dev.Close())
	return errors.Join(errs...)
}

// writeSummary writes the memory summary with every source the server has.
func (s *server) writeSummary(w io.Writer) error {
	return track.WriteSummary(w, s.tr, track.WithSources(s.sources()), track.TopSites(5))
}

// serveSummary answers GET /debug/tensors/summary.
func (s *server) serveSummary(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if err := s.writeSummary(w); err != nil {
		s.log.Warn("writing summary", slog.Any("err", err))
	}
}

// tick ends the watcher's window for one request, called once the
// request's own tensors are freed: what still grows from one request to the
// next is kept past them.
//
// The first cfg.watchAfter windows are the watcher's warm-up
// (track.WarmUp). A site whose memory follows the requests in flight (the
// KV cache, the logits) grows while a starting server ramps up to its
// concurrency, window after window, just as a leak does; the watcher judges
// what grows after the ramp, and still names a leak a few requests later.
func (s *server) tick() {
	// Tick fails only after Stop, which waits for every handler to leave.
	_ = s.watcher.Tick()
}

// onSuspect is the watcher's callback: it runs on the request goroutine that
// ended the window, so it only logs and remembers.
func (s *server) onSuspect(sus track.Suspect) {
	s.log.Warn("leak suspect: live bytes keep growing at one call site",
		slog.String("site", sus.Site.String()),
		slog.String("growth_per_request", format.Bytes(sus.GrowthPerWindow)),
		slog.String("live", format.Bytes(sus.LiveBytes)),
		slog.Int64("tensors", sus.LiveCount),
		slog.String("stack", sus.Site.Stack("")))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.firstSuspect == nil {
		s.firstSuspect = &sus
	}
}

// suspect returns the first site the watcher flagged, or nil.
func (s *server) suspect() *track.Suspect {
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

// sources are the figures the summary and the metrics read besides the
// tracker's own.
func (s *server) sources() track.Sources {
	return track.Sources{Pools: []track.PoolSource{s.pool}, Caches: []track.CacheSource{s.prompts},
		Devices: []track.DeviceSource{s.dev}, Watcher: s.watcher}
}
