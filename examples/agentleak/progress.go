package main

import (
	"fmt"
	"io"

	"github.com/tensorlife/tensorlife/report"
)

// progress shows requests done and live bytes: one line updated in place on
// a terminal, a plain line every tenth of the run otherwise.
type progress struct {
	w     io.Writer
	tty   bool
	total int
	every int
	drawn bool
}

func newProgress(w io.Writer, tty bool, total int) *progress {
	return &progress{w: w, tty: tty, total: total, every: max(1, total/10)}
}

func (p *progress) update(done int, liveBytes int64) {
	line := fmt.Sprintf("requests %d/%d, live %s", done, p.total, report.Bytes(liveBytes))
	switch {
	case p.tty:
		fmt.Fprintf(p.w, "\r%-60s", line)
		p.drawn = true
	case done%p.every == 0 || done == p.total:
		fmt.Fprintln(p.w, line)
		p.drawn = true
	}
}

// done ends the progress display with a blank line.
func (p *progress) done() {
	if p.drawn {
		if p.tty {
			fmt.Fprint(p.w, "\r\033[K")
			return
		}
		fmt.Fprintln(p.w)
	}
}
