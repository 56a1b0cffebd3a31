package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/tensorlife/tensorlife/pprofexport"
	"github.com/tensorlife/tensorlife/timeline"
)

// writeFiles writes the profile, and the picture and trace when asked,
// and says how to read them and where the out-of-memory dump went.
func (s *session) writeFiles(w io.Writer) error {
	errs := []error{s.dumpWritten(w)}
	if s.o.profile != "" {
		if err := pprofexport.WriteFile(s.o.profile, s.tr.Snapshot()); err != nil {
			errs = append(errs, err)
		} else {
			fmt.Fprintf(w, "profile of the live tensors, %s; read it with\n  go tool pprof -top %s\n", s.o.profile, s.o.profile)
		}
	}
	if s.o.timeline == "" && s.o.trace == "" {
		return errors.Join(errs...)
	}
	title := "agentleak, leaky"
	if s.o.fixed {
		title = "agentleak, fixed"
	}
	var reserved int64
	for _, l := range s.lanes {
		reserved += l.pool.Stats().Reserved
	}
	topts := []timeline.Option{timeline.Title(title)} // the budget line is the pools'
	if reserved > 0 {
		topts = append(topts, timeline.Reserved(reserved)) // beside the tensor bytes
	}
	tl, err := timeline.Build(s.tr, topts...)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if s.o.timeline != "" {
		if err := tl.WriteSVGFile(s.o.timeline); err != nil {
			errs = append(errs, err)
		} else {
			fmt.Fprintf(w, "picture of live memory by site (open in a browser):\n  %s\n", s.o.timeline)
		}
	}
	if s.o.trace != "" {
		if err := tl.WriteTraceFile(s.o.trace); err != nil {
			errs = append(errs, err)
		} else {
			fmt.Fprintf(w, "trace (open in ui.perfetto.dev):\n  %s\n", s.o.trace)
		}
	}
	return errors.Join(errs...)
}

// dumpWritten waits for the out-of-memory dump, if the run wrote one, and
// lists its files.
func (s *session) dumpWritten(w io.Writer) error {
	if s.dumper == nil {
		return nil
	}
	err := s.dumper.Wait()
	dump, ok := s.dumper.Last()
	if !ok {
		return err
	}
	if len(dump.Files) > 0 {
		fmt.Fprintf(w, "out-of-memory dump, written when the first allocation failed:\n")
		for _, f := range dump.Files {
			fmt.Fprintf(w, "  %s\n", f)
		}
	}
	return err
}
