package tracktest

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/tensorlife/tensorlife/internal/format"
	"github.com/tensorlife/tensorlife/track"
)

// ErrMisuse means a check found a tensor freed twice, or used after its
// Free, while it watched. The error is a *MisuseError that names the lines.
var ErrMisuse = errors.New("tracktest: tensor misused")

// MisuseError is the report of a check that found double frees or uses
// after free: for each, the line that allocated the tensor, the line that
// freed it first and the one that freed it again or used it. It matches
// ErrMisuse with errors.Is. The AllowMisuse option lets a test that
// misuses a tensor on purpose pass.
type MisuseError struct {
	Tracker string
	Scope   string // the Context scope; empty for the whole tracker
	Misuses []track.Misuse
	// Lost counts misuses the tracker no longer kept when the check read
	// them: more happened than it remembers.
	Lost uint64
}

// Is reports whether target is ErrMisuse.
func (e *MisuseError) Is(target error) bool { return target == ErrMisuse }

func (e *MisuseError) Error() string {
	var b strings.Builder
	where := fmt.Sprintf("tracker %q", e.Tracker)
	if e.Scope != "" {
		where += fmt.Sprintf(", scope %q", e.Scope)
	}
	var doubles, uses int
	for _, m := range e.Misuses {
		if m.Kind == track.EventUseAfterFree {
			uses++
		} else {
			doubles++
		}
	}
	var kinds []string
	if doubles > 0 || uses == 0 {
		kinds = append(kinds, fmt.Sprintf("%d double free(s)", doubles+int(e.Lost)))
	}
	if uses > 0 {
		kinds = append(kinds, fmt.Sprintf("%d use(s) after free", uses))
	}
	fmt.Fprintf(&b, "tracktest: %s in %s", strings.Join(kinds, " and "), where)
	if e.Lost > 0 {
		fmt.Fprintf(&b, " (%d no longer kept)", e.Lost)
	}
	b.WriteString(":\n")
	for _, m := range e.Misuses {
		what := "freed twice"
		if m.Kind == track.EventUseAfterFree {
			what = "used after free"
		}
		fmt.Fprintf(&b, "tensor %d (%s", m.ID, format.Bytes(m.Bytes))
		if m.Labels.Len() > 0 {
			fmt.Fprintf(&b, ", labels %s", m.Labels)
		}
		fmt.Fprintf(&b, ") %s\n", what)
		line := func(what string, s *track.Site, deferred bool) {
			if deferred {
				what += " by a deferred Free"
			}
			if s == nil {
				fmt.Fprintf(&b, "  %s at: unknown\n", what)
				return
			}
			f := s.Location()
			fmt.Fprintf(&b, "  %s at: %s\n      %s:%d\n", what, f.Function, f.File, f.Line)
		}
		line("allocated", m.Allocated, false)
		line("first freed", m.FirstFree, m.FirstDeferred)
		if m.Kind == track.EventUseAfterFree {
			line("used", m.Use, false)
		} else {
			line("freed again", m.SecondFree, m.SecondDeferred)
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// misuseWatch is where a check began reading a tracker's misuses.
type misuseWatch struct {
	tr    *track.Tracker
	scope scope
	from  uint64
	allow bool
	// now is set for a watch that began at its call (a scope, the tests
	// of TestMain); one that began at the last VerifyNone or Find of tr
	// moves that mark on when it checks.
	now bool
}

// misuseCursor remembers the misuses of one tracker that VerifyNone and
// Find already reported, so each is reported by the first such check after
// it. It is the tracker's own (track.Local): it goes with the tracker, and
// no two trackers, so no two tests, share one.
type misuseCursor struct {
	mu   sync.Mutex
	last uint64
}

// cursors keeps each tracker's cursor.
var cursors = track.NewLocal(func() *misuseCursor { return new(misuseCursor) })

// cursorOf returns tr's cursor; a fresh one each time if tr keeps no room
// for it (track.ErrTooManyLocals): every misuse is then read from the
// first.
func cursorOf(tr *track.Tracker) *misuseCursor {
	c, err := cursors.Of(tr)
	if err != nil {
		return new(misuseCursor)
	}
	return c
}

// cursor returns where tr's next VerifyNone or Find begins reading its
// misuses: 0 before the first one.
func cursor(tr *track.Tracker) uint64 {
	c := cursorOf(tr)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// advanceCursor marks tr's misuses up to latest reported.
func advanceCursor(tr *track.Tracker, latest uint64) {
	c := cursorOf(tr)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last = max(c.last, latest)
}

// watchMisuse begins watching tr's misuses: from now for a scope or the
// tests of TestMain, from the last VerifyNone or Find of tr otherwise
// (since tracks the tracker's whole life until one ran).
func (c *config) watchMisuse(tr *track.Tracker, scope scope, now bool) *misuseWatch {
	w := &misuseWatch{tr: tr, scope: scope, allow: c.allowMisuse, now: now}
	if now {
		_, _, w.from = tr.Books().MisuseSince(^uint64(0) - 1)
		return w
	}
	w.from = cursor(tr)
	return w
}

// check returns the misuses since the watch began, within the scope by the
// allocation's labels, or nil. A watch that began at the last VerifyNone or
// Find of tr marks them reported for the next one.
func (w *misuseWatch) check() *MisuseError {
	ms, lost, latest := w.tr.Books().MisuseSince(w.from)
	if !w.now {
		advanceCursor(w.tr, latest)
	}
	if w.allow {
		return nil
	}
	e := &MisuseError{Tracker: w.tr.Name(), Scope: w.scope.name}
	for _, m := range ms {
		if w.scope.ctx != nil && !m.MadeUnder(w.scope.ctx) {
			continue
		}
		e.Misuses = append(e.Misuses, m)
	}
	if w.scope.ctx == nil {
		e.Lost = lost // a lost misuse may have been the scope's or not
	}
	if len(e.Misuses) == 0 && e.Lost == 0 {
		return nil
	}
	return e
}
