package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/tensorlife/tensorlife/contrib/gomlxtrack"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/pprofexport"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/httptrack"
	"github.com/tensorlife/tensorlife/track/watch"
)

// The model: two dense layers whose weights are compiled into its
// programs as constants.
const (
	inputs, hidden, outputs = 64, 32, 16
)

var (
	weights1 = dense(inputs, hidden)
	weights2 = dense(hidden, outputs)
)

func dense(in, out int) [][]float32 {
	w := make([][]float32, in)
	for i := range w {
		w[i] = make([]float32, out)
		for j := range w[i] {
			w[i][j] = float32((i+j)%7-3) / 16
		}
	}
	return w
}

// model is the graph: tanh(x·W1)·W2.
func model(x *graph.Node) *graph.Node {
	g := x.Graph()
	h := graph.Tanh(graph.MatMul(x, graph.Const(g, weights1)))
	return graph.MatMul(h, graph.Const(g, weights2))
}

// requestBytes is what a request of rows holds on the backend at most: its
// input, which the program takes, and its output.
func requestBytes(rows int) int64 { return int64(rows) * (inputs + outputs) * 4 }

// errLive is returned by Close when outputs were still live.
var errLive = errors.New("gomlxserver: GoMLX buffers still live at shutdown")

// server is the service: the tracker, the tracked backend and the model's
// program, the pool that admits requests and the watcher.
type server struct {
	cfg     config
	log     *slog.Logger
	tr      *track.Tracker
	backend backends.Backend
	exec    *graph.Exec
	pool    *pool.Pool
	watcher *watch.Watcher
	tensors http.Handler // the profile handler
	close   sync.Once
}

func newServer(cfg config, logger *slog.Logger) (*server, error) {
	s := &server{cfg: cfg, log: logger}
	var err error
	s.tr, err = track.New(track.Name("gomlxserver"), track.Logger(logger),
		track.RequestKinds(httptrack.RouteKey), track.OnLeak(s.onDropped))
	if err != nil {
		return nil, err
	}
	if err := gomlxtrack.Install(s.tr); err != nil { // the one line: every GoMLX buffer is tracked
		return nil, err
	}
	if s.backend, err = backends.NewWithConfig("go"); err != nil {
		return nil, err
	}
	if s.exec, err = graph.NewExec(s.backend, model); err != nil {
		return nil, err
	}
	s.exec.SetMaxCache(-1) // one program per batch size, as many services do
	// The pool holds no GoMLX memory: its budget is what admission
	// reserves against, on the device the records name ("go:0"), so that
	// each request reserves its kind's learned peak of GoMLX memory.
	dev, err := tensor.NewHostDevice(cfg.budget, tensor.DeviceName("go:0"))
	if err != nil {
		return nil, err
	}
	if s.pool, err = pool.New(dev, pool.Budget(cfg.budget), pool.Tracker(s.tr)); err != nil {
		return nil, err
	}
	if s.watcher, err = watch.New(s.tr, watch.OnSuspect(s.onSuspect)); err != nil {
		return nil, err
	}
	if s.tensors, err = pprofexport.NewHandler(s.tr); err != nil {
		return nil, err
	}
	return s, nil
}

// public is the public listener's handler.
func (s *server) public() http.Handler {
	mux := http.NewServeMux()
	// The window ends after the request does: httptrack.Route ends it when
	// predict returns.
	mux.Handle("POST /predict", s.tickAfter(httptrack.Route(http.HandlerFunc(s.predict))))
	return mux
}

// debug is the debug listener's handler.
func (s *server) debug() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/debug/pprof/tensors", s.tensors)
	return mux
}

func (s *server) tickAfter(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		_ = s.watcher.Tick() // fails only after Stop
	})
}

// prediction is predict's answer.
type prediction struct {
	Rows    int       `json:"rows"`
	Outputs []float32 `json:"outputs"` // the first row's
}

// predict answers POST /predict?rows=N.
func (s *server) predict(w http.ResponseWriter, r *http.Request) {
	rows, err := strconv.Atoi(r.URL.Query().Get("rows"))
	if err != nil || rows < 1 || rows > s.cfg.maxRows {
		http.Error(w, fmt.Sprintf("rows: want 1..%d", s.cfg.maxRows), http.StatusBadRequest)
		return
	}
	ctx := r.Context()
	kind := s.tr.KindOf(track.LabelsFrom(ctx))
	ctx, adm, err := s.pool.Admit(ctx, kind, requestBytes(s.cfg.maxRows))
	if err != nil {
		s.log.Warn("admission refused", slog.Any("err", err))
		w.Header().Set("Retry-After", "1")
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	defer adm.End()

	batch := make([][]float32, rows)
	for i := range batch {
		batch[i] = make([]float32, inputs)
		for j := range batch[i] {
			batch[i][j] = float32(j%5) / 4
		}
	}
	outs, err := gomlxtrack.Exec(ctx, s.exec, batch) // its outputs are this request's
	if err != nil {
		http.Error(w, "model failed", http.StatusInternalServerError)
		s.log.Error("exec", slog.Any("err", err))
		return
	}
	y := outs[0].Value().([][]float32)
	if !s.cfg.leak {
		for _, o := range outs {
			_ = o.FinalizeAll()
		}
	} // with -leak, left for the garbage collector, as before GoMLX's PR #65
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(prediction{Rows: rows, Outputs: y[0]})
}

// onSuspect logs a leak suspect the watcher named.
func (s *server) onSuspect(sus watch.Suspect) {
	loc := sus.Site.Location()
	s.log.Warn("leak suspect: memory that outlived its requests keeps growing",
		slog.String("site", loc.Function), slog.String("line", fmt.Sprintf("%s:%d", loc.File, loc.Line)),
		slog.Int64("outlived_bytes", sus.OutlivedBytes), slog.Int64("outlived_count", sus.OutlivedCount))
}

// onDropped logs a buffer the collector found dropped without FinalizeAll.
func (s *server) onDropped(l track.LeakReport) {
	loc := l.Site.Location()
	s.log.Warn("GoMLX buffer dropped without FinalizeAll", slog.Int64("bytes", l.Bytes),
		slog.String("site", loc.Function), slog.String("line", fmt.Sprintf("%s:%d", loc.File, loc.Line)),
		slog.Bool("reclaimed", l.Reclaimed))
}

// Close lists the buffers still live, then finalizes the program, the
// backend and the pool; it returns errLive when outputs were still live.
func (s *server) Close(stderr io.Writer) error {
	var err error
	s.close.Do(func() {
		live := 0
		for _, a := range s.tr.Snapshot().Allocations {
			if a.Kind == gomlxtrack.KindBuffer {
				live++
				fmt.Fprintf(stderr, "live: %d bytes %s%v made at %s\n", a.Bytes, a.DType, a.Shape, a.Site)
			}
		}
		if live > 0 {
			err = fmt.Errorf("%w: %d", errLive, live)
		} else {
			fmt.Fprintln(stderr, "no GoMLX buffer left live")
		}
		_ = s.watcher.Stop()
		s.exec.Finalize()
		s.backend.Finalize()
		err = errors.Join(err, s.pool.Close())
	})
	return err
}
