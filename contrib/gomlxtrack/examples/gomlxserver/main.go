// Command gomlxserver serves a small GoMLX model over HTTP with tensorlife
// watching its memory: one line, gomlxtrack.Install, tracks every buffer of
// GoMLX's pure-Go backend; httptrack makes each request a tensorlife
// request; the pool admits each one against a budget by what its kind's
// requests held at their peak; the growth watcher judges what outlives
// them. Run it with the leak GoMLX fixed in its PR #65 replayed (each
// request's outputs are left for the garbage collector, which does not see
// device memory):
//
//	go run ./examples/gomlxserver -leak
//
// and, from another shell:
//
//	for i in $(seq 8); do curl -s -X POST 'localhost:8080/predict?rows=32'; done
//	go tool pprof -top 'http://localhost:6060/debug/pprof/tensors?outlived=1&kind=gomlx'
//
// Within a few requests the log names (*server).predict's line that calls
// gomlxtrack.Exec as a leak suspect, and -top puts (*server).predict first:
// its outputs outlive the requests that made them. When the collector runs,
// each dropped output is reported at that line and finalized. Without
// -leak, predict finalizes its outputs, and nothing outlives a request but
// the compiled programs.
//
// # Endpoints
//
// The public listener (-addr, localhost:8080):
//
//	POST /predict?rows=N   runs the model on a batch of N rows (1..-max-rows);
//	                       JSON answer; 400 for a bad N; 503 with Retry-After
//	                       when the budget cannot hold the request's reservation
//
// The debug listener (-debug-addr, 127.0.0.1:6060; empty turns it off):
//
//	GET /debug/pprof/tensors   GoMLX's live buffers and programs in pprof format
//	                           (?outlived=1: what outlived its request; &kind=gomlx: buffers alone)
//
// SIGINT or SIGTERM stops the server; it then lists the GoMLX buffers still
// live and exits with status 1 if there were any (under -leak, those the
// collector has not reclaimed yet).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stderr)
	stop()
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	default:
		fmt.Fprintln(os.Stderr, "gomlxserver:", err)
		os.Exit(1)
	}
}

// errBadConfig is matched by the errors of bad flags.
var errBadConfig = errors.New("gomlxserver: bad configuration")

// config is the server's flags.
type config struct {
	addr, debugAddr string
	leak            bool
	budget          int64
	maxRows         int
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("gomlxserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: gomlxserver [flags]")
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.addr, "addr", "localhost:8080", "public listen address")
	fs.StringVar(&cfg.debugAddr, "debug-addr", "127.0.0.1:6060", "debug listen address (pprof); empty: none")
	fs.BoolVar(&cfg.leak, "leak", false, "leave each request's outputs to the garbage collector (GoMLX PR #65's leak)")
	fs.Int64Var(&cfg.budget, "budget", 64<<20, "bytes the requests' reservations may hold at once")
	fs.IntVar(&cfg.maxRows, "max-rows", 256, "the largest batch a request may ask for")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	switch {
	case fs.NArg() > 0:
		return config{}, fmt.Errorf("%w: unexpected arguments %q", errBadConfig, fs.Args())
	case cfg.addr == "":
		return config{}, fmt.Errorf("%w: -addr is empty", errBadConfig)
	case cfg.maxRows < 1 || cfg.maxRows > 1<<16:
		return config{}, fmt.Errorf("%w: -max-rows %d: want 1..65536", errBadConfig, cfg.maxRows)
	case cfg.budget < requestBytes(cfg.maxRows):
		return config{}, fmt.Errorf("%w: -budget %d cannot hold one request of -max-rows (%d bytes)",
			errBadConfig, cfg.budget, requestBytes(cfg.maxRows))
	}
	return cfg, nil
}

// run serves until ctx is done, then stops and reports what is live.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	s, err := newServer(cfg, logger)
	if err != nil {
		return err
	}
	servers := []*http.Server{{Handler: s.public(), ReadHeaderTimeout: 10 * time.Second}}
	addrs := []string{cfg.addr}
	if cfg.debugAddr != "" {
		servers = append(servers, &http.Server{Handler: s.debug(), ReadHeaderTimeout: 10 * time.Second})
		addrs = append(addrs, cfg.debugAddr)
	}
	served := make(chan error, len(servers))
	for i, srv := range servers {
		ln, err := net.Listen("tcp", addrs[i])
		if err != nil {
			for _, started := range servers[:i] {
				_ = started.Close()
			}
			return errors.Join(err, s.Close(stderr))
		}
		logger.Info("serving", slog.String("addr", ln.Addr().String()))
		go func() { served <- srv.Serve(ln) }()
	}
	<-ctx.Done()
	logger.Info("shutting down")
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var errs []error
	for _, srv := range servers {
		errs = append(errs, srv.Shutdown(stop))
	}
	for range servers {
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(append(errs, s.Close(stderr))...)
}
