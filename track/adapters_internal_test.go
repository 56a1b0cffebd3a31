package track

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A site recorded through an adapter names the first frame outside the
// library it wraps and the adapter, once both are marked, whatever helpers
// the tracker has.
func TestAdapterPackagesTrimTheWrappedLibrary(t *testing.T) {
	// The marks are the process's, and only grow: each run marks packages
	// of its own (-count, -shuffle).
	run := adapterRuns.Add(1)
	adapter := fmt.Sprintf("example.invalid/adapter%d", run)
	vendor := fmt.Sprintf("example.invalid/mlvendor%d/", run)
	user := Frame{Function: "example.invalid/service.handle", File: "/src/service/handle.go", Line: 40}
	frames := []Frame{
		{Function: "github.com/tensorlife/tensorlife/track.(*Tracker).Record", File: "/src/track/tracker.go"},
		{Function: adapter + ".(*backend).record", File: "/src/adapter/backend.go"},
		{Function: vendor + "graph.(*Exec).Exec", File: "/src/mlvendor/graph/exec.go"},
		user,
	}
	site := func() *Site {
		s := &Site{frames: frames}
		s.symOnce.Do(func() {})
		return s
	}
	assert.Equal(t, frames[1], site().Location(), "unmarked, the adapter's frame is the headline")

	require.NoError(t, AdapterPackages(adapter+".", vendor))
	require.NoError(t, AdapterPackages(vendor), "a repeat is no new prefix")
	assert.Equal(t, user, site().Location())
	assert.Equal(t, []Frame{user}, site().UserFrames())

	// The adapter's tests are the caller's code, as tensorlife's are.
	testFrame := Frame{Function: adapter + ".TestX", File: "/src/adapter/x_test.go"}
	assert.False(t, isLibraryFrame(testFrame))
	assert.True(t, isLibraryFrame(frames[1]))
	assert.False(t, isLibraryFrame(Frame{Function: adapter + "more.F", File: "/src/f.go"}),
		"a package prefix ending in '.' names that package alone")
}

// adapterRuns numbers the runs of the test above.
var adapterRuns atomic.Int64

func TestAdapterPackagesRejectsBadPrefixes(t *testing.T) {
	for _, bad := range []string{"", "x", "example.invalid/noend", "has space/", strings.Repeat("a", 2000) + "/"} {
		err := AdapterPackages("example.invalid/goodbutunused/", bad)
		require.Error(t, err, "%q", bad)
		assert.True(t, errors.Is(err, ErrInvalidOption), "%v", err)
	}
	cur := adapterMarks.prefixes.Load()
	if cur != nil {
		assert.NotContains(t, *cur, "example.invalid/goodbutunused/", "a call with a bad prefix adds none")
	}
}

// siteHere captures its caller's site, for a record made later, as an
// adapter does once the call that made a buffer has returned.
//
//go:noinline
func siteHere(t *Tracker) *Site { return t.Books().CallerSite(1) }

func TestRecordAtBooksAtASiteCapturedBefore(t *testing.T) {
	tr, err := New(Name("recordat"))
	require.NoError(t, err)
	other, err := New(Name("other"))
	require.NoError(t, err)
	site := siteHere(tr)
	assert.Equal(t, "github.com/tensorlife/tensorlife/track.TestRecordAtBooksAtASiteCapturedBefore", site.Location().Function)

	ctx, end := WithRequest(WithLabels(context.Background(), "model", "m"))
	r := &Record{Bytes: 64, Meta: InternMeta("tensor", "host", "float32", []int{16})}
	done := make(chan error)
	go func() { done <- tr.Books().RecordAt(ctx, r, site) }() // another goroutine: the site is the caller's
	require.NoError(t, <-done)
	assert.Same(t, site, r.Site())
	model, _ := r.Labels().Get("model")
	assert.Equal(t, "m", model)
	assert.True(t, r.inFlight(), "its request's")
	end()
	require.NoError(t, r.Release())

	for name, s := range map[string]*Site{"nil": nil, "another tracker's": siteHere(other)} {
		err := tr.Books().RecordAt(context.Background(), &Record{Bytes: 1}, s)
		assert.ErrorIs(t, err, ErrMisuse, name)
	}
	again := tr.Books().RecordAt(context.Background(), r, site)
	assert.ErrorIs(t, again, ErrMisuse, "a record is recorded once")
	assert.EqualValues(t, 3, tr.Totals().Misuse)
}
