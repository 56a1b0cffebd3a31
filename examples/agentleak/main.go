// Command agentleak replays a GPU memory leak from an agent service and
// shows how tensorlife finds it.
//
// The service rebuilt its attention-mask tensor from a growing slice at
// every generation step and kept each one in an unbounded global cache. It
// took eight hours to crash, and days to find. Run it:
//
//	go run ./examples/agentleak                  # the leak, found four ways
//	go run ./examples/agentleak -requests 2000   # ... until the budget runs out: an OOM dump
//	go run ./examples/agentleak -fixed           # the fix: nothing left live
//
// When the budget runs out, the first out-of-memory error leaves a dump in
// -oom-dir (package oomdump): the profile, the summary, and the timeline's
// trace and picture of the run up to it.
//
// It exits with status 0 when it served every request, 1 when the run
// stopped early (the leak ran the budget out) or a file could not be
// written, and 2 for bad flags.
//
// It runs on the host device, which behaves like a GPU of fixed capacity,
// so it needs no GPU. Built with -tags cuda (see package tensor/cuda), it
// runs on a GPU too, with -capacity capping the memory it takes:
//
//	go run -tags cuda ./examples/agentleak -device cuda:0
//
// With several devices (-device host,host stands in for two GPUs) it
// spreads the requests over them round-robin, one pool of -budget per
// device on one tracker; the summary and the profile split by device.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/devflag"
)

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout, isTerminal(os.Stdout))
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "agentleak:", err)
	}
	os.Exit(exitCode(err))
}

// exitCode is the process's exit status for what run returned: 0 when every
// request was served, 2 for flags it cannot run with, 1 otherwise.
func exitCode(err error) int {
	var usage usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp), errors.As(err, &usage):
		return 2
	default:
		return 1
	}
}

// usageError is a command line run cannot run with.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// stoppedError means the run stopped before serving every request; the
// report, printed before, tells why in full.
type stoppedError struct {
	served, requests int
	err              error
}

func (e *stoppedError) Error() string {
	why := "an error"
	if errors.Is(e.err, tensor.ErrOutOfMemory) {
		why = "out of memory"
	}
	return fmt.Sprintf("the run stopped after %d of %d requests: %s (see \"the run stopped\" above)", e.served, e.requests, why)
}

func (e *stoppedError) Unwrap() error { return e.err }

// options are the command line.
type options struct {
	workload
	capacity int64  // device bytes: the host device's size, or the cap on a GPU
	budget   int64  // pool budget bytes
	profile  string // where to write the live-tensor profile
	timeline string // where to write the SVG picture; empty: none
	trace    string // where to write the Perfetto trace; empty: none
	oomDir   string // where the out-of-memory dump goes; empty: none
	// clockStep, when positive, is the tracker's clock: one step per
	// reading from a fixed start, so that a picture drawn from the run
	// is the same at every run (scripts/docs-pictures.sh draws docs/'s).
	clockStep time.Duration

	device devflag.List // -device: host or cuda:N, or several, comma-separated
}

func parseFlags(args []string, out io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("agentleak", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(out, "usage: agentleak [flags]\n\nReplays an agent's attention-mask leak on a host device "+
			"that behaves like a GPU\n(or on a GPU: -device cuda:N), and shows how tensorlife finds the line that leaks.\n\nflags:\n")
		fs.PrintDefaults()
	}
	fs.BoolVar(&o.fixed, "fixed", false, "run the fix: one growable mask per request, a bounded prompt-mask cache")
	fs.IntVar(&o.requests, "requests", 64, "requests to serve (the leak exhausts the default budget near 420)")
	fs.IntVar(&o.tokens, "tokens", 24, "tokens generated per request")
	fs.IntVar(&o.batch, "batch", 4, "sequences decoded together per request")
	fs.Uint64Var(&o.seed, "seed", 1, "seed for the choice of prompts")
	devflag.Var(fs, &o.device)
	fs.Int64Var(&o.capacity, "capacity", 64<<20, "device capacity in bytes (on cuda:N, the most memory taken from the GPU)")
	fs.Int64Var(&o.budget, "budget", 16<<20, "pool memory budget in bytes, checked before the device is asked")
	fs.StringVar(&o.profile, "profile", "tensors.pb.gz", "write the live-tensor profile here (empty: skip)")
	fs.StringVar(&o.timeline, "timeline", "", "write an SVG picture of live memory by site over time here")
	fs.StringVar(&o.trace, "trace", "", "write a Perfetto trace of the run here")
	fs.DurationVar(&o.clockStep, "clock-step", 0,
		"if set, the tracker reads a clock that moves this much at each reading, for a reproducible timeline")
	fs.StringVar(&o.oomDir, "oom-dir", filepath.Join(os.TempDir(), "agentleak-oom"),
		"on the first out-of-memory error, write the profile, summary and timeline here (empty: skip)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if o.requests < 1 || o.tokens < 1 || o.batch < 1 || o.capacity < 1 || o.budget < 1 {
		return o, errors.New("-requests, -tokens, -batch, -capacity and -budget must be positive")
	}
	if o.budget > o.capacity {
		return o, fmt.Errorf("-budget %d is above the device -capacity %d", o.budget, o.capacity)
	}
	return o, nil
}

func run(ctx context.Context, args []string, out io.Writer, tty bool) error {
	o, err := parseFlags(args, out)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	s, err := newSession(o)
	if err != nil {
		return err
	}
	res := s.serve(ctx, newProgress(out, tty, o.requests))
	reportErr := s.report(out, res)
	var stopped error
	if res.err != nil {
		stopped = &stoppedError{served: res.served, requests: o.requests, err: res.err}
	}
	return errors.Join(stopped, reportErr, s.close())
}

// isTerminal reports whether f is a character device, so progress can
// update one line in place.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
