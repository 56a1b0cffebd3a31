package tracktest_test

import (
	"context"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

// newKVTensor is a service's allocation helper: the tracker names it
// (HelperFunctions), so the report names its callers.
//
//go:noinline
func newKVTensor(e *env) *tensor.Tensor {
	x, err := tensor.New(context.Background(), e.alloc, tensor.Float32, 16)
	if err != nil {
		panic(err)
	}
	return x
}

//go:noinline
func attend(e *env) *tensor.Tensor { return newKVTensor(e) }

//go:noinline
func fromPrefill(e *env) *tensor.Tensor { return attend(e) }

//go:noinline
func fromDecode(e *env) *tensor.Tensor { return attend(e) }

func TestReportNamesHelperCallersAndTellsThemApart(t *testing.T) {
	e := newEnv(t, "helpers", track.HelperFunctions(thisPackage+".newKVTensor"))
	a, b := fromPrefill(e), fromDecode(e)
	err := tracktest.Find(e.tr, fast...)
	require.ErrorIs(t, err, tracktest.ErrLeaked)
	text := err.Error()
	assert.NotRegexp(t, `(?m)^site .*newKVTensor`, text, "the helper is no headline")
	heads := regexp.MustCompile(`(?m)^site .*$`).FindAllString(text, -1)
	require.Len(t, heads, 2, text)
	for _, h := range heads {
		assert.Regexp(t, `^site `+thisPackage+`\.attend \(helper_frames_test\.go:\d+\) via `, h)
	}
	assert.Regexp(t, `(?m)^site .* via tracktest_test\.fromPrefill \(helper_frames_test\.go:\d+\): 1 tensor`, text)
	assert.Regexp(t, `(?m)^site .* via tracktest_test\.fromDecode \(helper_frames_test\.go:\d+\): 1 tensor`, text)
	require.NoError(t, a.Free())
	require.NoError(t, b.Free())
}
