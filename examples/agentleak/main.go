// Command agentleak replays a GPU memory leak from an agent service and
// shows how tensorlife finds it.
//
// The service rebuilt an attention-mask tensor from a growing slice at
// every generation step and kept each one in an unbounded global cache. It
// took eight hours to crash. Run it:
//
//	go run ./examples/agentleak           # the leak
//	go run ./examples/agentleak -fixed    # the fix
//
// It runs on the host device, which behaves like a GPU of fixed capacity,
// so it needs no GPU.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "agentleak:", err)
		os.Exit(1)
	}
}

// options are the command line.
type options struct {
	config
	capacity int64
}

func parseFlags(args []string, out io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("agentleak", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.BoolVar(&o.fixed, "fixed", false, "build each request's mask once and free it (the fix); default is the leak")
	fs.IntVar(&o.requests, "requests", 64, "number of requests to serve")
	fs.IntVar(&o.tokens, "tokens", 24, "tokens generated per request")
	fs.IntVar(&o.batch, "batch", 4, "sequences per request")
	fs.Uint64Var(&o.seed, "seed", 1, "random seed for prompt lengths")
	fs.Int64Var(&o.capacity, "capacity", 256<<20, "host device capacity in bytes")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.requests < 1 || o.tokens < 1 || o.batch < 1 || o.capacity < 1 {
		return o, errors.New("-requests, -tokens, -batch and -capacity must be positive")
	}
	return o, nil
}

func run(args []string, out io.Writer) error {
	o, err := parseFlags(args, out)
	if err != nil {
		return err
	}
	res, err := simulate(context.Background(), o)
	if err != nil {
		return err
	}
	printReport(out, o, res)
	return nil
}

// result is what a run leaves behind.
type result struct {
	served int
	snap   *track.Snapshot // the live set after the last request
	err    error           // the error that stopped the run, if any
}

func simulate(ctx context.Context, o options) (*result, error) {
	dev, err := tensor.NewHostDevice(o.capacity)
	if err != nil {
		return nil, err
	}
	tr, err := track.New(track.WithName("agentleak"))
	if err != nil {
		return nil, err
	}
	alloc, err := tensor.NewDeviceAllocator(dev, tr)
	if err != nil {
		return nil, err
	}
	a := newAgent(o.config, alloc)
	res := &result{}
	for id := range o.requests {
		if err := a.serve(ctx, id); err != nil {
			res.err = err
			break
		}
		res.served++
	}
	res.snap = tr.Snapshot()
	if err := a.close(); err != nil {
		return nil, err
	}
	return res, nil
}

func printReport(w io.Writer, o options, res *result) {
	variant := "leaky"
	if o.fixed {
		variant = "fixed"
	}
	fmt.Fprintf(w, "agentleak (%s): served %d of %d requests, %d tokens each\n", variant, res.served, o.requests, o.tokens)
	if res.err != nil {
		fmt.Fprintf(w, "\nstopped by: %v\n", res.err)
	}
	t := res.snap.Totals
	fmt.Fprintf(w, "\nlive after the run: %d tensors, %s (peak %s)\n", t.LiveCount, tensor.FormatBytes(t.LiveBytes), tensor.FormatBytes(t.PeakBytes))
	top := res.snap.Top(5)
	if len(top) == 0 {
		fmt.Fprintln(w, "no tensor is live: nothing leaked")
		return
	}
	fmt.Fprintln(w, "\ntop sites by live bytes:")
	fmt.Fprintf(w, "  %10s  %7s  %s\n", "live", "tensors", "site")
	for _, s := range top {
		loc := s.Site.Location()
		fmt.Fprintf(w, "  %10s  %7d  %s\n  %10s  %7s  %s\n", tensor.FormatBytes(s.LiveBytes), s.LiveCount,
			loc.Function, "", "", fmt.Sprintf("%s:%d", loc.File, loc.Line))
	}
}
