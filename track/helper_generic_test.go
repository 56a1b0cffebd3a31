package track_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/report"
	"github.com/tensorlife/tensorlife/track"
)

// vendorNew is a generic allocation helper, as a vendored library's: the
// runtime names it "vendorNew[...]".
//
//go:noinline
func vendorNew[T any](tr *track.Tracker, n int64) *track.Record {
	r := &track.Record{Bytes: n, Meta: track.InternMeta("tensor", "", "", nil)}
	if err := tr.Books().Record(context.Background(), r, 0); err != nil {
		panic(err)
	}
	return r
}

// genericPool's method is "(*genericPool[...]).get" to the runtime.
type genericPool[T any] struct{ tr *track.Tracker }

//go:noinline
func (p *genericPool[T]) get(n int64) *track.Record { return vendorNew[T](p.tr, n) }

//go:noinline
func callGeneric(tr *track.Tracker) *track.Record { return (&genericPool[float32]{tr}).get(8) }

func TestHelperFunctionsMatchGenericsByPlainName(t *testing.T) {
	for _, tc := range []struct {
		name  string
		marks []string
		want  string
	}{
		{"unmarked", nil, testPkg + "vendorNew[...]"},
		{"plain name", []string{testPkg + "vendorNew"}, testPkg + "(*genericPool[...]).get"},
		{"printed name", []string{testPkg + "vendorNew[...]"}, testPkg + "(*genericPool[...]).get"},
		{"plain names of a function and a method", []string{testPkg + "vendorNew", testPkg + "(*genericPool).get"}, testPkg + "callGeneric"},
		{"plain prefix of a type's methods", []string{testPkg + "vendorNew", testPkg + "(*genericPool)."}, testPkg + "callGeneric"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []track.Option
			if tc.marks != nil {
				opts = append(opts, track.HelperFunctions(tc.marks...))
			}
			tr := newTracker(t, opts...)
			r := callGeneric(tr)
			defer release(t, tr, r)
			assert.Equal(t, tc.want, r.Site().Location().Function)
			assert.Zero(t, tr.Totals().HelpersUnmatched, "every name matched a frame")
		})
	}
}

func TestHelperFunctionsCountNamesThatMatchNothing(t *testing.T) {
	tr := newTracker(t, track.HelperFunctions(testPkg+"vendorAlloc", testPkg+"vendorAloc", "example.com/gone."))
	assert.Equal(t, 3, tr.Totals().HelpersUnmatched, "nothing is symbolized yet")
	r := callVendor(tr)
	defer release(t, tr, r)

	var out bytes.Buffer
	require.NoError(t, report.WriteSummary(&out, tr))
	assert.Equal(t, 2, tr.Totals().HelpersUnmatched, "the misspelt name and the stale prefix match no stack")
	assert.Regexp(t, `(?m)^  unmatched helper names\s+2 \(HelperFunctions names no stack matched\)$`, out.String())
	assert.Equal(t, testPkg+"(*vendorPool).get", r.Site().Location().Function, "the right name still applies")

	clean := newTracker(t)
	out.Reset()
	require.NoError(t, report.WriteSummary(&out, clean))
	assert.NotContains(t, out.String(), "unmatched helper names", "no row without HelperFunctions")
}

func TestHelperFunctionsBoundsCountDistinctNames(t *testing.T) {
	distinct := make([]string, 256)
	for i := range distinct {
		distinct[i] = fmt.Sprintf("%sf%d", testPkg, i)
	}
	prefixes := []string{testPkg + "p.", testPkg + "p.", "example.com/q/", "example.com/q/"}
	repeated := append(append(append([]string(nil), distinct[:254]...), distinct[:254]...), prefixes...)
	_, err := track.New(track.HelperFunctions(repeated...))
	require.NoError(t, err, "254 names, two prefixes and their repeats are 256 distinct names")
	_, err = track.New(track.HelperFunctions(distinct...), track.HelperFunctions(distinct...))
	require.NoError(t, err, "a name given twice counts once")

	_, err = track.New(track.HelperFunctions(append(distinct, testPkg+"one.more")...))
	require.ErrorIs(t, err, track.ErrInvalidOption)
	assert.Contains(t, err.Error(), "more than 256 distinct names")
}

func TestHelperFunctionsCutsABadNameInItsError(t *testing.T) {
	huge := strings.Repeat("x", 1<<20) + " y"
	_, err := track.New(track.HelperFunctions(huge))
	require.True(t, errors.Is(err, track.ErrInvalidOption), err)
	assert.Less(t, len(err.Error()), 300, "the error repeats a bounded part of the name")
	assert.Contains(t, err.Error(), "... (1048578 bytes)")
}
