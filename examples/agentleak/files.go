package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/tensorlife/tensorlife/pprofexport"
	"github.com/tensorlife/tensorlife/timeline"
)

// writeFiles writes the profile, and the picture and trace when asked,
// and says how to read them.
func (s *session) writeFiles(w io.Writer) error {
	var errs []error
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
	tl, err := timeline.Build(s.tr, timeline.BudgetLine(s.o.budget), timeline.Title(title))
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
			fmt.Fprintf(w, "trace (open in ui.perfetto.dev or chrome://tracing):\n  %s\n", s.o.trace)
		}
	}
	return errors.Join(errs...)
}
