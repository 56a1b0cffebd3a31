package oomdump_test

import (
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// hostileReserver is an allocator on the tracker whose PartInfo panics.
type hostileReserver struct{ _ int }

func (*hostileReserver) PartInfo() track.PartInfo { panic("hostile PartInfo") }

// A part that panics is read on the out-of-memory path (the pool's error)
// and by the dump's summary: neither lets it through, the dump is written
// whole, and the tracker counts each panic.
func TestDumpSurvivesAHostilePart(t *testing.T) {
	s := newService(t, false)
	part := &hostileReserver{}
	track.Attach(s.tr, part)
	var err error
	require.NotPanics(t, func() { err = s.leakMasks() })
	require.ErrorIs(t, err, tensor.ErrOutOfMemory)
	require.NoError(t, s.dumper.Wait())
	dump, ok := s.dumper.Last()
	require.True(t, ok)
	require.NoError(t, dump.Err)
	assert.Zero(t, s.dumper.Stats().Panics, "nothing reached the dumper's own recover")
	assert.GreaterOrEqual(t, s.tr.Totals().PartPanics, int64(2), "the OOM error's reading and the summary's")
	summary, err := os.ReadFile(dump.Files[1])
	require.NoError(t, err)
	assert.Contains(t, string(summary), "Unread parts")
	assert.Contains(t, string(summary), "hostileReserver.PartInfo panicked")
	runtime.KeepAlive(part)
}
