package tracktest_test

import (
	"context"
	"fmt"
	"regexp"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/invariants"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

// dropView makes a View of x and drops it without Free; it returns the
// line that made it, as reports print it.
//
//go:noinline
func dropView(t testing.TB, x *tensor.Tensor) string {
	line := callerLine() + 1
	_, err := x.View(0, 2)
	require.NoError(t, err)
	return fmt.Sprintf("a View made at owners_test.go:%d", line)
}

// dropRetain makes a Retain of x and drops it without Free.
//
//go:noinline
func dropRetain(t testing.TB, x *tensor.Tensor) string {
	line := callerLine() + 1
	_, err := x.Retain()
	require.NoError(t, err)
	return fmt.Sprintf("a Retain made at owners_test.go:%d", line)
}

// A dropped View's or Retain's line is named whether the collector found
// the handle before the check began or while it ran.
func TestDroppedOwnerLineDoesNotDependOnWhenTheCollectorRan(t *testing.T) {
	cases := []struct {
		name    string
		opts    []track.Option
		scoped  bool // checked by a Context scope, which watches from its start
		drop    func(testing.TB, *tensor.Tensor) string
		freeOwn bool // the own handle is freed: only the dropped owner held it
	}{
		{"view dropped, own handle live", nil, false, dropView, false},
		{"retain dropped, tracker keeps leaks", []track.Option{track.ReclaimLeaks(false)}, false, dropRetain, true},
		{"view dropped, reclaimed, in a scope", nil, true, dropView, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			reports := map[string]string{}
			for _, order := range []string{"before", "during"} {
				noAutoGC(t)
				e := newEnv(t, "owners", c.opts...)
				st := newFakeT(t.Name())
				ctx := context.Background()
				if c.scoped {
					ctx = tracktest.Context(st, e.tr, scopedOpts()...)
				}
				x := e.newTensor(t, ctx, 8)
				want := c.drop(t, x)
				if c.freeOwn {
					require.NoError(t, x.Free())
				}
				if order == "before" {
					collectDropped(t, e.tr, 1, e.tr.Totals().LiveCount-boolInt(c.scoped && c.freeOwn))
				} else {
					require.Zero(t, e.tr.Totals().GCLeaks, "the collector must not have run yet")
				}
				var report string
				if c.scoped {
					st.finish()
					require.Len(t, st.Errors(), 1)
					report = st.Errors()[0]
				} else {
					err := tracktest.Find(e.tr, opts()...)
					require.ErrorIs(t, err, tracktest.ErrLeaked)
					report = err.Error()
				}
				require.EqualValues(t, 1, e.tr.Totals().GCLeaks, "%s: the check saw the collector find it", order)
				assert.Contains(t, report, "dropped without Free (found by the garbage collector): "+want, order)
				reports[order] = scopeNumber.ReplaceAllString(normalize(t, report), "#_")
				if !c.freeOwn {
					require.NoError(t, x.Free())
				}
				runtime.KeepAlive(x)
			}
			assert.Equal(t, reports["before"], reports["during"], "the report must not depend on when the collector ran")
		})
	}
}

// scopeNumber is the count that tells two scopes of one test apart.
var scopeNumber = regexp.MustCompile(`#\d+`)

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// The advice fits the handle that leaked: a dropped View is an extra owner
// that needs its own Free, not a tensor to free "on every path".
func TestAdviceFitsTheHolder(t *testing.T) {
	noAutoGC(t)
	e := newEnv(t, "advice", track.ReclaimLeaks(false))
	x := e.newTensor(t, context.Background(), 8)
	dropView(t, x)
	require.NoError(t, x.Free())
	collectDropped(t, e.tr, 1, 1)
	err := tracktest.Find(e.tr, opts()...)
	require.ErrorIs(t, err, tracktest.ErrLeaked)
	msg := err.Error()
	assert.Contains(t, msg, "\nA View or Retain became unreachable before Free: each extra owner needs its own Free")
	assert.NotContains(t, msg, "free it on every path", "the tensor's own handle was freed")
	assert.NotContains(t, msg, "Free live tensors before the check", "nothing is live")
}

// A misuse report gives bytes as every report does, and the labels.
func TestMisuseReportGivesBytesAndLabels(t *testing.T) {
	e := newEnv(t, "misuse-format")
	x := e.newTensor(t, track.WithLabels(context.Background(), "request", "r7"), 1024)
	require.NoError(t, x.Free())
	err, _ := invariants.Recover(x.Free)
	require.ErrorIs(t, err, tensor.ErrDoubleFree)
	err = tracktest.Find(e.tr, opts()...)
	require.ErrorIs(t, err, tracktest.ErrMisuse)
	assert.Regexp(t, `\ntensor \d+ \(4 KiB, labels \{request=r7\}\) freed twice\n`, err.Error())
}
