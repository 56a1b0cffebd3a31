package track_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/report"
	"github.com/tensorlife/tensorlife/track"
)

const testPkg = "github.com/tensorlife/tensorlife/track_test."

// newKV is an allocation helper, as a service's would be; the trackers of
// these tests name it (helperTracker).
//
//go:noinline
func newKV(tr *track.Tracker, n int64) *track.Record {
	r := &track.Record{Bytes: n, Meta: track.InternMeta("kv-cache", "", "", nil)}
	if err := tr.Books().Record(context.Background(), r, 0); err != nil {
		panic(err)
	}
	return r
}

// helperTracker is a tracker told that newKV is a helper.
func helperTracker(t *testing.T, opts ...track.Option) *track.Tracker {
	return newTracker(t, append([]track.Option{track.HelperFunctions(testPkg + "newKV")}, opts...)...)
}

// unmarkedKV is the same helper without the mark: the control.
//
//go:noinline
func unmarkedKV(tr *track.Tracker, n int64) *track.Record {
	r := &track.Record{Bytes: n, Meta: track.InternMeta("kv-cache", "", "", nil)}
	if err := tr.Books().Record(context.Background(), r, 0); err != nil {
		panic(err)
	}
	return r
}

//go:noinline
func prefill(tr *track.Tracker, kv func(*track.Tracker, int64) *track.Record) *track.Record {
	return kv(tr, 64)
}

//go:noinline
func decode(tr *track.Tracker, kv func(*track.Tracker, int64) *track.Record) *track.Record {
	return kv(tr, 32)
}

func TestHelperNamesTheCaller(t *testing.T) {
	tr := helperTracker(t)
	p, d := prefill(tr, newKV), decode(tr, newKV)
	defer release(t, tr, p, d)
	assert.Equal(t, testPkg+"prefill", p.Site().Location().Function)
	assert.Equal(t, testPkg+"decode", d.Site().Location().Function)
	assert.Equal(t, testPkg+"prefill", p.Site().UserFrames()[0].Function, "UserFrames starts at the caller")

	// The control: an unmarked helper is the headline of both stacks.
	up, ud := prefill(tr, unmarkedKV), decode(tr, unmarkedKV)
	defer release(t, tr, up, ud)
	assert.Equal(t, testPkg+"unmarkedKV", up.Site().Location().Function)
	assert.Equal(t, testPkg+"unmarkedKV", ud.Site().Location().Function)
}

// A helper mark is the tracker's own: a tracker made without it, in the
// same process and at the same time, names the helper, and two runs of the
// test (go test -count=2) see the same.
func TestHelperMarksAreTheTrackers(t *testing.T) {
	marked, plain := helperTracker(t), newTracker(t)
	m, p := prefill(marked, newKV), prefill(plain, newKV)
	defer release(t, marked, m)
	defer release(t, plain, p)
	assert.Equal(t, testPkg+"prefill", m.Site().Location().Function)
	assert.Equal(t, testPkg+"newKV", p.Site().Location().Function, "another tracker's mark is not seen")
}

//go:noinline
func vendorAlloc(tr *track.Tracker, n int64) *track.Record {
	r := &track.Record{Bytes: n, Meta: track.InternMeta("tensor", "", "", nil)}
	if err := tr.Books().Record(context.Background(), r, 0); err != nil {
		panic(err)
	}
	return r
}

type vendorPool struct{ tr *track.Tracker }

//go:noinline
func (p *vendorPool) get(n int64) *track.Record { return vendorAlloc(p.tr, n) }

//go:noinline
func callVendor(tr *track.Tracker) *track.Record { return (&vendorPool{tr}).get(16) }

func TestHelperFunctionsOption(t *testing.T) {
	tests := []struct {
		name  string
		marks []string
		want  string
	}{
		{"none: the vendor's function is named", nil, testPkg + "vendorAlloc"},
		{"one function", []string{testPkg + "vendorAlloc"}, testPkg + "(*vendorPool).get"},
		{"function and a type's methods by prefix", []string{testPkg + "vendorAlloc", testPkg + "(*vendorPool)."}, testPkg + "callVendor"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var opts []track.Option
			if tc.marks != nil {
				opts = append(opts, track.HelperFunctions(tc.marks...))
			}
			tr := newTracker(t, opts...)
			r := callVendor(tr)
			defer release(t, tr, r)
			assert.Equal(t, tc.want, r.Site().Location().Function)
		})
	}
}

func TestHelperFunctionsValidation(t *testing.T) {
	many := make([]string, 256+1)
	for i := range many {
		many[i] = testPkg + "f" + strings.Repeat("x", i)
	}
	for _, names := range [][]string{{""}, {"a b"}, {strings.Repeat("x", 2000)}, many} {
		_, err := track.New(track.HelperFunctions(names...))
		require.Error(t, err)
		assert.True(t, errors.Is(err, track.ErrInvalidOption), err)
		assert.Contains(t, err.Error(), "HelperFunctions")
	}
}

// sharedLine is a caller reached from two places; its allocation line is
// the headline of both stacks.
//
//go:noinline
func sharedLine(tr *track.Tracker) *track.Record { return newKV(tr, 128) }

//go:noinline
func fromSession(tr *track.Tracker) *track.Record { return sharedLine(tr) }

//go:noinline
func fromBatch(tr *track.Tracker) *track.Record { return sharedLine(tr) }

func TestDistinctFrameTellsSharedHeadlinesApart(t *testing.T) {
	tr := helperTracker(t)
	a, b, c := fromSession(tr), fromBatch(tr), prefill(tr, newKV)
	defer release(t, tr, a, b, c)
	require.Equal(t, a.Site().Location(), b.Site().Location(), "one headline")
	sites := []*track.Site{a.Site(), b.Site(), c.Site()}
	fa, ok := a.Site().DistinctFrame(sites)
	require.True(t, ok)
	assert.Equal(t, testPkg+"fromSession", fa.Function)
	fb, ok := b.Site().DistinctFrame(sites)
	require.True(t, ok)
	assert.Equal(t, testPkg+"fromBatch", fb.Function)
	_, ok = c.Site().DistinctFrame(sites)
	assert.False(t, ok, "a site with a headline of its own needs no via")

	var out bytes.Buffer
	require.NoError(t, report.WriteSummary(&out, tr))
	assert.Contains(t, out.String(), "track_test.sharedLine (helper_test.go:")
	assert.Contains(t, out.String(), "via track_test.fromSession (helper_test.go:")
	assert.Contains(t, out.String(), "via track_test.fromBatch (helper_test.go:")
	assert.NotContains(t, out.String(), "newKV", "the helper is no headline")
}
