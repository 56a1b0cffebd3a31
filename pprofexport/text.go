package pprofexport

import (
	"bufio"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/tensorlife/tensorlife/internal/format"

	"github.com/tensorlife/tensorlife/track"
)

// WriteText writes snap as plain text for people, the handler's ?debug=1
// answer. A header gives the tracker's totals; a table follows with one row
// per call site, most live bytes first: the site's id, its live count and
// bytes, the allocations made there since start, the tensors the garbage
// collector found leaked, the age of its oldest live tensor (at the
// snapshot's time) and the line that allocated. Then each site's stack,
// under its id, so that rows that share a line can be told apart. Two
// snapshots with the same content print the same text.
func WriteText(w io.Writer, snap *track.Snapshot, opts ...ProfileOption) error {
	cfg, err := newProfileConfig(opts)
	if err != nil {
		return err
	}
	if snap, err = cfg.narrow(snap); err != nil {
		return err
	}
	return writeText(w, snap, cfg)
}

func writeText(w io.Writer, snap *track.Snapshot, cfg config) error {
	if w == nil {
		return ErrNilWriter
	}
	if snap == nil {
		return ErrNilSnapshot
	}
	bw := bufio.NewWriter(w)
	t := snap.Totals
	fmt.Fprintf(bw, "# tensorlife: live tensors of tracker %q at %s\n", snap.TrackerName, snap.Time.UTC().Format(time.RFC3339))
	if f := describeFilter(snap.Filter); f != "" {
		fmt.Fprintf(bw, "# filter: %s\n", f)
	}
	fmt.Fprintf(bw, "# tracker: %d live tensors, %d bytes; peak %d bytes; %d allocations, %d bytes; %d leaked; %d sites\n",
		t.LiveCount, t.LiveBytes, t.PeakBytes, t.Allocs, t.AllocBytes, t.GCLeaks, t.Sites)
	if t.Overflowed > 0 {
		fmt.Fprintf(bw, "# %d allocations had stacks beyond the stack table; shown as %s\n", t.Overflowed, format.OverflowFunction)
	}
	fmt.Fprintln(bw, "#")

	tw := tabwriter.NewWriter(bw, 0, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "site\tlive\tlive_bytes\talloc\talloc_bytes\tleaked\toldest_age\t\tlocation")
	sites := snap.Sites
	if snap.Filter.Active() {
		// Only the sites the filter selected tensors from.
		sites = nil
		for _, st := range snap.Sites {
			if st.LiveCount > 0 {
				sites = append(sites, st)
			}
		}
	}
	for _, st := range sites {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%s\t\t%s\n", siteID(st.Site), st.LiveCount, st.LiveBytes,
			st.AllocCount, st.AllocBytes, st.GCLeaks, age(snap.Time, st.Oldest), siteFrames(st.Site, cfg.keepLibrary)[0])
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("pprofexport: write text: %w", err)
	}
	for _, st := range sites {
		fmt.Fprintf(bw, "\nsite %d\n", siteID(st.Site))
		for _, f := range siteFrames(st.Site, cfg.keepLibrary) {
			fmt.Fprintf(bw, "\t%s\n\t\t%s:%d\n", f.Function, f.File, f.Line)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("pprofexport: write text: %w", err)
	}
	return nil
}

// age renders how old the oldest live tensor was at now; "-" for none.
func age(now, oldest time.Time) string {
	if oldest.IsZero() {
		return "-"
	}
	return format.Age(now.Sub(oldest))
}

// siteID is the site's id; -1 for a missing site.
func siteID(s *track.Site) int {
	if s == nil {
		return -1
	}
	return s.ID()
}
