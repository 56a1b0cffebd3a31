package track

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
)

// Adapter packages. An adapter that tracks another library's memory (a
// GoMLX backend wrapper, a gorgonia engine) records from deep inside that
// library's call path: between the line a person must change and the
// adapter's Record sit the library's frames and the adapter's own. Those
// frames are how memory was asked for, not who asked, in every tracker of
// the process, whatever helpers the tracker was made with; so they are
// trimmed like tensorlife's own (Site.Location, Site.UserFrames), once, at
// symbolization, and the capture stays the one frame-pointer walk.
//
// The marks are process-wide, as the code they name is, and are only ever
// added to: a program names its adapters before their first record, and a
// site symbolized before a mark keeps the headline it was given.

// maxAdapterPackages bounds the distinct prefixes of AdapterPackages: each
// frame of a site is compared with every one when the site is symbolized.
const maxAdapterPackages = 256

var adapterMarks struct {
	mu       sync.Mutex // serializes writers
	prefixes atomic.Pointer[[]string]
}

// AdapterPackages marks the packages whose import paths start with one of
// prefixes as library code in every tracker, as tensorlife's own packages
// are: a site's Location is the first frame outside them. A prefix ends in
// "/" (a module or a folder of packages: "github.com/gomlx/gomlx/") or "."
// (one package: "example.com/adapter."). An adapter calls it once, before
// it records; a repeated prefix is no new one. Its frames in a _test.go file
// stay the caller's, as tensorlife's do. At most 256 prefixes in a process;
// a bad or surplus prefix is an error matching ErrInvalidOption, and none
// of that call's prefixes is added. Safe for concurrent use.
func AdapterPackages(prefixes ...string) error {
	for _, p := range prefixes {
		if len(p) < 2 || len(p) > maxHelperName || strings.ContainsAny(p, " \t\n") ||
			!(strings.HasSuffix(p, "/") || strings.HasSuffix(p, ".")) {
			return fmt.Errorf("%w: AdapterPackages(%s): want an import path prefix ending in \"/\" or \".\", without spaces, 2..%d bytes",
				ErrInvalidOption, quoteCut(p), maxHelperName)
		}
	}
	adapterMarks.mu.Lock()
	defer adapterMarks.mu.Unlock()
	var old []string
	if cur := adapterMarks.prefixes.Load(); cur != nil {
		old = *cur
	}
	next := append([]string(nil), old...)
	for _, p := range prefixes {
		if !containsString(next, p) {
			next = append(next, p)
		}
	}
	if len(next) > maxAdapterPackages {
		return fmt.Errorf("%w: AdapterPackages: more than %d distinct prefixes", ErrInvalidOption, maxAdapterPackages)
	}
	if len(next) != len(old) {
		adapterMarks.prefixes.Store(&next)
	}
	return nil
}

func containsString(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// isAdapterFrame reports whether f is in a package AdapterPackages marked,
// outside its tests.
func isAdapterFrame(f Frame) bool {
	cur := adapterMarks.prefixes.Load()
	if cur == nil || strings.HasSuffix(f.File, "_test.go") {
		return false
	}
	for _, p := range *cur {
		if strings.HasPrefix(f.Function, p) {
			return true
		}
	}
	return false
}

// RecordAt adds r under ctx's labels and request, as Record does, at site:
// a site CallerSite captured before, on the goroutine whose stack names the
// line that asked for the memory, for an adapter that books a buffer after
// the call that made it returns, or on another goroutine. A nil site, or
// one of another tracker, is an error matching ErrMisuse.
func (bk *Books) RecordAt(ctx context.Context, r *Record, site *Site) error {
	t := (*Tracker)(bk)
	if site == nil || site.feeds != t.feeds {
		t.misuse.Add(1)
		return fmt.Errorf("%w: RecordAt with a site not of tracker %q", ErrMisuse, t.cfg.name)
	}
	if err := t.admitNew(r); err != nil {
		return err
	}
	t.insert(ctx, r, site)
	return nil
}
