package track

import (
	"fmt"
	"strings"
	"sync/atomic"
)

// Helper frames. Services allocate through helpers of their own
// (newKV(ctx, alloc, n) called from prefill, decode and a session cache);
// naming the helper in every report hides the caller whose tensors leak. A
// tracker is told its helpers with the HelperFunctions option, and its
// reports then name the first frame that is neither tensorlife's nor a
// helper's (Site.Location).
//
// Marks belong to the tracker they were given to, and are fixed when it is
// made: two trackers (two tests) never see each other's helpers, and a
// site's headline, once computed, never changes. Names rather than entry
// PCs are matched, since an inlined helper has no entry of its own.

// helperRules are the helpers a tracker was told of (HelperFunctions), each
// name once, with whether it has matched a frame of a site's headline yet.
type helperRules struct {
	exact    map[string]*helperName
	prefixes []*helperName
}

type helperName struct {
	name    string
	matched atomic.Bool // set when a headline skipped a frame for it
}

// plainName is fn without the type arguments the runtime prints as "[...]":
// "pkg.vendorNew[...]" is "pkg.vendorNew", "pkg.(*Pool[...]).get" is
// "pkg.(*Pool).get", so that a generic function is named as it is written.
func plainName(fn string) string {
	if !strings.Contains(fn, "[...]") {
		return fn
	}
	return strings.ReplaceAll(fn, "[...]", "")
}

func (h *helperRules) match(fn string) bool {
	if h == nil {
		return false
	}
	plain := plainName(fn)
	n := h.exact[fn]
	if n == nil {
		n = h.exact[plain]
	}
	for i := 0; n == nil && i < len(h.prefixes); i++ {
		if p := h.prefixes[i]; strings.HasPrefix(fn, p.name) || strings.HasPrefix(plain, p.name) {
			n = p
		}
	}
	if n == nil {
		return false
	}
	if !n.matched.Load() {
		n.matched.Store(true)
	}
	return true
}

// unmatched counts the names that have matched no headline frame yet.
func (h *helperRules) unmatched() int {
	if h == nil {
		return 0
	}
	n := 0
	for _, x := range h.exact {
		if !x.matched.Load() {
			n++
		}
	}
	for _, x := range h.prefixes {
		if !x.matched.Load() {
			n++
		}
	}
	return n
}

// Bounds of HelperFunctions.
const (
	// maxHelperFunctions bounds the distinct names one tracker is given:
	// each frame of a report is matched against every prefix.
	maxHelperFunctions = 256
	// maxHelperName bounds one name's length.
	maxHelperName = 1024
	// maxQuotedName bounds how much of a bad name an error repeats.
	maxQuotedName = 64
)

// HelperFunctions marks functions as allocation helpers of this tracker, as
// testing.T.Helper does: reports name their caller. A name is "pkg/path.fn",
// "pkg/path.(*T).m" or a prefix ending in "." or "/"; at most 256 names of
// up to 1024 bytes (Totals.HelpersUnmatched: those no stack has matched).
func HelperFunctions(names ...string) Option {
	names = append([]string(nil), names...) // the caller may reuse its slice
	return optionFunc(func(c *config) error {
		// Each New starts from no rules, so several HelperFunctions of one
		// New add to the rules this New made, and nothing else shares them.
		rules := c.helpers
		if rules == nil {
			rules = &helperRules{exact: make(map[string]*helperName)}
		}
		for _, n := range names {
			if n == "" || len(n) > maxHelperName || strings.ContainsAny(n, " \t\n") {
				return fmt.Errorf("%w: HelperFunctions(%s): want a function or package name without spaces, 1..%d bytes",
					ErrInvalidOption, quoteCut(n), maxHelperName)
			}
			if rules.has(n) {
				continue // a repeat is no new name
			}
			if len(rules.exact)+len(rules.prefixes) == maxHelperFunctions {
				return fmt.Errorf("%w: HelperFunctions: more than %d distinct names", ErrInvalidOption, maxHelperFunctions)
			}
			if strings.HasSuffix(n, ".") || strings.HasSuffix(n, "/") {
				rules.prefixes = append(rules.prefixes, &helperName{name: n})
			} else {
				rules.exact[n] = &helperName{name: n}
			}
		}
		c.helpers = rules
		return nil
	})
}

// has reports whether n is one of the rules' names already.
func (h *helperRules) has(n string) bool {
	if _, ok := h.exact[n]; ok {
		return true
	}
	for _, p := range h.prefixes {
		if p.name == n {
			return true
		}
	}
	return false
}

// quoteCut quotes s for an error, cut to maxQuotedName bytes.
func quoteCut(s string) string {
	if len(s) <= maxQuotedName {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q... (%d bytes)", s[:maxQuotedName], len(s))
}

// isHelperFrame reports whether f is a helper's by the tracker's rules.
func isHelperFrame(f Frame, rules *helperRules) bool {
	return rules.match(f.Function)
}
