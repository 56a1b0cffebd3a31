// Command adopted shows tensorlife owning memory it did not allocate. A
// library (C code under cgo, library_cgo.go; a pure-Go twin otherwise)
// hands out an output buffer per request; the program adopts each one
// (foreign.Adopt), so the buffer is recorded at the adopting line with the
// request's labels and released through the library exactly once.
//
// The leaky variant keeps every adopted output in a history slice, as a
// service that logs its outputs might: tracktest, the growth watcher and
// the profile all name the adopting line. With -fixed, each output is
// freed when the request is done.
//
//	go run ./examples/adopted -requests 64
//	go run ./examples/adopted -fixed
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/tensorlife/tensorlife/report"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/foreign"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/watch"
)

// outputBytes is the size of one output buffer; workspaceBytes is the
// library's own scratch memory, which it never hands out: it shows in the
// summary as memory outside tensorlife.
const (
	outputBytes    = 4 << 10
	workspaceBytes = 256 << 10
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "adopted:", err)
		os.Exit(1)
	}
}

// config is what the flags say.
type config struct {
	requests int
	fixed    bool
	capacity int64
}

func parse(args []string) (config, error) {
	fs := flag.NewFlagSet("adopted", flag.ContinueOnError)
	var c config
	fs.IntVar(&c.requests, "requests", 64, "requests to serve")
	fs.BoolVar(&c.fixed, "fixed", false, "free each adopted output when its request is done")
	fs.Int64Var(&c.capacity, "capacity", 4<<20, "bytes of the library's device memory")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.requests <= 0 {
		return c, fmt.Errorf("-requests %d: want > 0", c.requests)
	}
	return c, nil
}

// session is one run: the library, the tracker and the watcher.
type session struct {
	cfg     config
	lib     *Library
	tr      *track.Tracker
	watcher *watch.Watcher
	first   *watch.Suspect // the first suspect the watcher named
	firstAt int            // after how many requests
	history []*tensor.Tensor
	scratch tensor.DevicePtr // the library's workspace
}

func newSession(cfg config) (*session, error) {
	lib, err := OpenLibrary("lib:0", cfg.capacity)
	if err != nil {
		return nil, err
	}
	tr, err := track.New(track.Name("adopted"))
	if err != nil {
		return nil, errors.Join(err, lib.Close())
	}
	scratch, err := lib.Output(workspaceBytes)
	if err != nil {
		return nil, errors.Join(err, lib.Close())
	}
	s := &session{cfg: cfg, lib: lib, tr: tr, scratch: scratch}
	s.watcher, err = watch.New(tr, watch.Windows(8), watch.MostOf(6), watch.MinGrowth(outputBytes),
		watch.OnSuspect(func(sp watch.Suspect) {
			if s.first == nil {
				s.first = &sp
			}
		}))
	if err != nil {
		return nil, errors.Join(err, lib.Close())
	}
	return s, nil
}

// serve answers n requests, ticking the watcher after each.
func (s *session) serve(ctx context.Context) error {
	for i := range s.cfg.requests {
		ctx := track.WithLabels(ctx, "request", fmt.Sprintf("r%d", i))
		if err := s.request(ctx); err != nil {
			return err
		}
		if err := s.watcher.Tick(); err != nil {
			return err
		}
		if s.first != nil && s.firstAt == 0 {
			s.firstAt = i + 1
		}
	}
	return nil
}

// request runs the library and adopts its output.
func (s *session) request(ctx context.Context) error {
	out, err := s.adoptOutput(ctx)
	if err != nil {
		return err
	}
	head := make([]byte, 8)
	if err := out.CopyToHostAt(0, head); err != nil {
		return errors.Join(err, out.Free())
	}
	if !s.cfg.fixed {
		s.history = append(s.history, out) // the leak: kept for ever
		return nil
	}
	return out.Free()
}

// adoptOutput asks the library for an output and adopts it: the line a
// leak report names.
//
//go:noinline
func (s *session) adoptOutput(ctx context.Context) (*tensor.Tensor, error) {
	p, err := s.lib.Output(outputBytes)
	if err != nil {
		return nil, err
	}
	mem := foreign.Memory{Device: s.lib.Device(), Ptr: p, Bytes: outputBytes,
		Release: func(p tensor.DevicePtr) error { return s.lib.Release(p, outputBytes) }}
	t, err := foreign.Adopt(ctx, s.tr, mem, tensor.Spec{DType: tensor.Float32, Shape: tensor.Shape{outputBytes / 4}, Kind: "output"})
	if err != nil {
		return nil, errors.Join(err, s.lib.Release(p, outputBytes))
	}
	return t, nil
}

// close frees what the session holds and closes the library.
func (s *session) close() error {
	var err error
	for _, t := range s.history {
		err = errors.Join(err, t.Free())
	}
	s.history = nil
	err = errors.Join(err, s.lib.Release(s.scratch, workspaceBytes))
	return errors.Join(err, s.lib.Close())
}

func run(args []string, w io.Writer) error {
	cfg, err := parse(args)
	if err != nil {
		return err
	}
	s, err := newSession(cfg)
	if err != nil {
		return err
	}
	err = s.serve(context.Background())
	if err == nil {
		fmt.Fprintf(w, "served %d requests (library in C: %v)\n", cfg.requests, cgoLibrary)
		if s.first != nil {
			fmt.Fprintf(w, "the watcher named %s after %d requests\n", s.first.Site.Location(), s.firstAt)
		}
		// The library's device has no tensorlife allocator of the tracker's
		// on it: the one figure passed besides the tracker.
		err = report.WriteSummary(w, s.tr, report.TopSites(3), report.WithSources(report.Sources{
			Devices: []report.DeviceSource{s.lib.Device()}}))
	}
	return errors.Join(err, s.close())
}
