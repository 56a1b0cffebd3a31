package tracktest

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/tensorlife/tensorlife/track"
)

// ScopeLabel is the label key that Context tags tensors with. Its value
// names the test and the scope: "TestDecode/short#12".
const ScopeLabel = "tensorlife.test"

// ScopeT is what Context needs of a test: Error to fail it and Cleanup to
// check when it ends. *testing.T and *testing.B satisfy it. When the value
// also has Name() string, the name goes into the scope label; when it has
// Context() context.Context (testing.T since Go 1.24), the scope's context
// derives from it; Helper() is called when present.
type ScopeT interface {
	TestingT
	Cleanup(func())
}

// scopeIDs makes scope labels unique within the process, so two scopes of
// one test, or one test name run twice, never share tensors.
var scopeIDs atomic.Uint64

// Context returns a context for the test t that tags every tensor made
// under it (or under a context derived from it) with the label
// ScopeLabel="<t.Name()>#<n>", and registers a cleanup that checks, when
// the test ends, that no tensor carrying that label is live in tr (nil
// means track.Default()). Only the scope's tensors are checked, so tests
// running in parallel on one tracker do not see each other's tensors; the
// check settles and reports as VerifyNone does. From the call to the
// check, the scope also watches tr for tensors whose handles the garbage
// collector finds dropped without Free, and reports each one with its
// site, even after the tracker has reclaimed it.
//
// The scope also fails t when a tensor made under it (carrying its label)
// is freed twice between the call and the check, naming the allocation line
// and both Free lines; AllowMisuse lets it pass.
//
// The returned context derives from t.Context() when t has it, which the
// testing package cancels just before cleanups run, so code under test
// sees the test's end; otherwise from context.Background().
//
// Cleanups run last registered, first run: call Context before registering
// cleanups that free tensors made under it, so that they run before the
// check. An invalid option fails t at once with an error matching
// ErrInvalidOption; the context is still returned, untracked by any check,
// so the test can run on.
//
// A scope is a request (track.WithRequest): the check finds every tensor
// made under the context, however a cache relabels or adopts it since.
func Context(t ScopeT, tr *track.Tracker, opts ...ScopeOption) context.Context {
	if t == nil {
		// No test to fail and no cleanup to check in: say so where a
		// person will see it, and let the caller run on.
		fmt.Fprintln(stderr, "tracktest: Context called with a nil ScopeT: nothing will be checked")
		return context.Background()
	}
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	parent := context.Background()
	if c, ok := t.(interface{ Context() context.Context }); ok {
		if ctx := c.Context(); ctx != nil {
			parent = ctx
		}
	}
	name := "scope"
	if n, ok := t.(interface{ Name() string }); ok && n.Name() != "" {
		name = n.Name()
	}
	name += "#" + strconv.FormatUint(scopeIDs.Add(1), 10)
	ctx, end := track.WithRequest(parent)
	ctx = track.WithLabels(ctx, ScopeLabel, name)
	sc := scope{name: name, ctx: ctx}

	checkOpts := make([]Option, len(opts))
	for i, o := range opts {
		checkOpts[i] = o
	}
	cfg, err := newConfig(entryContext, checkOpts)
	if err != nil {
		t.Error(err)
		return ctx
	}
	w := cfg.watch(tracker(tr), sc, true)
	t.Cleanup(func() {
		end()
		if h, ok := t.(helper); ok {
			h.Helper()
		}
		le, me := cfg.checkWatched(w)
		if le != nil {
			t.Error(le)
		}
		if me != nil {
			t.Error(me)
		}
	})
	return ctx
}

// scope is what a check looks at: the tensors made under the request of
// ctx, wherever they are kept since (a cache that relabels or adopts one
// does not take it out), or, with a nil ctx, every tensor of the tracker.
type scope struct {
	name string // the ScopeLabel value, for reports; empty for the tracker
	ctx  context.Context
}

// holds reports whether a is in the scope.
func (s scope) holds(a *track.Allocation) bool { return s.ctx == nil || a.MadeUnder(s.ctx) }
