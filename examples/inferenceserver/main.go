// Command inferenceserver is an HTTP inference service built on tensorlife:
// a toy decode loop on pooled tensors, with the live-tensor profile, the
// memory metrics and the growth watcher wired in the way a real service
// would wire them. Run it, with the agent's mask leak injected:
//
//	go run ./examples/inferenceserver -leak
//
// and, from another shell:
//
//	curl -s -X POST 'localhost:8080/generate?tokens=32'         # one request
//	curl -s -d '{"prompt":128,"tokens":32}' -H 'Content-Type: application/json' localhost:8080/generate
//	go tool pprof -top http://localhost:6060/debug/pprof/tensors
//	curl -s localhost:6060/metrics | grep tensorlife
//	curl -s localhost:6060/debug/tensors/summary
//
// The mask builder logs the rebuilt mask at once, -top puts decodeLeaky
// first by inuse_space, tensorlife_tensors_live{kind="mask"} climbs with
// every request, and the log names decodeLeaky as a leak suspect within a
// few requests: its masks outlive the requests that made them. Without
// -leak the same requests leave nothing behind but the bounded prompt-mask
// cache, which the watcher never judges.
//
// # Endpoints
//
// The public listener (-addr, localhost:8080) serves what clients need and
// nothing else:
//
//	POST /generate              prompt, tokens, batch as query parameters or a JSON body;
//	                            JSON answer; 400 for bad parameters; 503 with Retry-After
//	                            when -max-inflight requests are running, the budget is
//	                            spent, or (-admission) the budget cannot hold the
//	                            request's reservation; other methods get 405
//	GET /healthz                200 while serving, 503 once shutting down
//
// The debug listener (-debug-addr, 127.0.0.1:6060; empty turns it off)
// serves what only operators should see:
//
//	GET /debug/pprof/           net/http/pprof, mounted explicitly
//	GET /debug/pprof/tensors    live tensors in pprof format (pprofexport.NewHandler)
//	GET /debug/tensors/summary  the memory summary (report.WriteSummary)
//	GET /metrics                OpenTelemetry metrics through the Prometheus exporter
//
// A 200 answer says what was served and the request's id, nothing of the
// server: what it holds is on the debug listener. An error answer carries
// the request's id (also in X-Request-Id) and a short reason; the
// out-of-memory report, which names source files and lines, goes to the
// log under that id. Ids are random, so they tell clients nothing of how
// many requests the server has served. The budget is checked at start to
// hold -max-inflight of the largest request the -max-* bounds allow.
//
// # Admission
//
// With -admission each /generate request is admitted before it starts
// (pool.Pool.AdmitSized): it states its size, its tokens (prompt plus the
// most it may generate) times its batch, with the worst case of that size
// as the fallback, and its pool reserves what the request's kind (its
// route) learned its requests of that size hold at their peak, or the
// fallback for a size the kind has not shown yet (or before
// pool.AdmitHistory of them ended); -sized=false reserves the kind's p99
// peak instead (pool.Pool.Admit), the largest request before that history.
// Its tensors draw from the reservation, which is released before the
// answer is written. A request whose reservation the budget cannot hold
// is answered 503 with Retry-After at once, before it holds any memory,
// and the log names its kind, size, reservation and the headroom; the
// metrics count admissions and refusals by kind, and the summary has an
// Admission section.
//
// The start-up check then counts reservations, not worst cases: the budget
// must hold one largest request next to the prompt-mask cache, and
// -max-inflight may allow more requests than the budget holds at their
// largest.
//
// A debug request that forces a garbage collection first (gc=1, on
// /debug/pprof/heap or /debug/pprof/tensors) is served once every 10
// seconds; another within that time gets 429 with Retry-After, so that no
// client can stop the server's work with a collection per request.
//
// # Shutdown
//
// SIGINT or SIGTERM stops the server gracefully: it ends the debug requests
// at once (a pending ?seconds= delta profile answers 503 instead of holding
// the shutdown), stops accepting, drains the requests in flight (-drain,
// then cancels them), closes the prompt-mask cache, prints the memory
// summary, and reports every tensor still live with the call sites holding
// it. Then it frees what is left and closes the pool. It exits with status
// 1 if tensors were still live (under -leak it always does), 0 otherwise.
//
// # On a GPU
//
// The server runs on the host device, Go memory that behaves like a GPU of
// -capacity bytes, so it needs no GPU. To run on one, build with -tags cuda
// (see package tensor/cuda) and pass -device cuda:N; -capacity then caps the
// memory the server takes from the GPU. The pool, masks, tracker, profile
// and metrics take any tensor.Device:
//
//	go run -tags cuda ./examples/inferenceserver -device cuda:0 -leak
//
// Several devices, comma-separated (-device cuda:0,cuda:1, or host,host
// standing in for two GPUs), each get a pool of -budget and a prompt cache
// of -cache on one tracker; requests take them round-robin, and the
// summary, metrics, profile (?device=) and OOM errors name the device.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
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
		fmt.Fprintln(os.Stderr, "inferenceserver:", err)
		os.Exit(1)
	}
}

// run serves until ctx is done, then shuts down gracefully. Logs, the
// shutdown summary and flag errors go to stderr. It returns the listener's
// error, or what Shutdown found: tensors still live, a pool that could not
// close.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	s, err := newServer(cfg, logger, stderr)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return errors.Join(err, s.Shutdown(ctx))
	}
	var debugLn net.Listener
	if cfg.debugAddr != "" {
		if debugLn, err = net.Listen("tcp", cfg.debugAddr); err != nil {
			return errors.Join(err, ln.Close(), s.Shutdown(ctx))
		}
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln, debugLn) }()

	var serveErr error
	select {
	case <-ctx.Done():
		logger.Info("shutting down", slog.Any("cause", context.Cause(ctx)))
	case serveErr = <-served:
		served = nil
		logger.Error("serving stopped", slog.Any("err", serveErr))
	}
	drain, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.drain)
	defer cancel()
	err = s.Shutdown(drain)
	if served != nil {
		serveErr = <-served
	}
	return errors.Join(serveErr, err)
}
