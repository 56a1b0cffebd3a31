package report_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/report"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/watch"
)

// TestSummaryShowsOwnersAndTheirBounds: the summary lists what each owner
// holds against its bound, and an owner over its bound is a suspect row
// naming it.
func TestSummaryShowsOwnersAndTheirBounds(t *testing.T) {
	tr, err := track.New(track.Name("owners"))
	require.NoError(t, err)
	dev, err := tensor.NewHostDevice(1 << 20)
	require.NoError(t, err)
	alloc, err := tensor.NewDeviceAllocator(dev, tr)
	require.NoError(t, err)
	w, err := watch.New(tr, watch.OnSuspect(func(watch.Suspect) {}))
	require.NoError(t, err)
	sessions := &track.Owner{Name: "sessions", MaxBytes: 1 << 10}
	var held []*tensor.Tensor
	for range 4 {
		x, err := tensor.New(context.Background(), alloc, tensor.Float32, 256)
		require.NoError(t, err)
		require.NoError(t, x.HandTo(sessions))
		held = append(held, x)
	}
	require.NoError(t, w.Tick())

	var b bytes.Buffer
	require.NoError(t, report.WriteSummary(&b, tr))
	out := b.String()
	assert.Contains(t, out, "\nOwners (what tensors were handed to)\n")
	assert.Regexp(t, `(?m)^  sessions +4 KiB +4 +1 KiB  \.\.\.\w+ \(owners_test.go:\d+\)$`, out)
	assert.Contains(t, out, "OVER ITS BOUND by 3 KiB")
	assert.Contains(t, out, `owner "sessions" holds 4 tensors, over its bound of 1 KiB`)
	assert.Contains(t, out, "for an owner: the owner holds more than its bound")
	for _, x := range held {
		require.NoError(t, x.Free())
	}
	b.Reset()
	require.NoError(t, report.WriteSummary(&b, tr))
	assert.NotContains(t, b.String(), "\nOwners (", "an owner holding nothing is not listed")
}
