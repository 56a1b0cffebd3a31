package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pprofexport"
	"github.com/tensorlife/tensorlife/report"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

// adoptFunc ends the adopting function's name: a test binary names package
// main by its import path.
const adoptFunc = "adopted.(*session).adoptOutput"

// fakeT collects what VerifyNone reports.
type fakeT struct {
	mu     sync.Mutex
	errors []string
}

func (f *fakeT) Error(args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errors = append(f.errors, fmt.Sprint(args...))
}

func newTestSession(t *testing.T, args ...string) *session {
	t.Helper()
	cfg, err := parse(args)
	require.NoError(t, err)
	s, err := newSession(cfg)
	require.NoError(t, err)
	require.NoError(t, s.serve(context.Background()))
	return s
}

func TestLeakedAdoptedOutputIsNamedAtTheAdoptingLine(t *testing.T) {
	s := newTestSession(t, "-requests", "32")

	t.Run("tracktest", func(t *testing.T) {
		ft := &fakeT{}
		tracktest.VerifyNone(ft, s.tr, tracktest.MaxRetries(0))
		require.Len(t, ft.errors, 1, "the leak fails the test")
		assert.Contains(t, ft.errors[0], adoptFunc)
		assert.Contains(t, ft.errors[0], "main.go:")
		assert.Contains(t, ft.errors[0], "output", "the adopted kind")
		assert.Contains(t, ft.errors[0], "request=r0")
	})
	t.Run("watcher", func(t *testing.T) {
		require.NotNil(t, s.first, "the watcher names a suspect")
		assert.True(t, strings.HasSuffix(s.first.Site.Location().Function, adoptFunc), s.first.Site.String())
		assert.LessOrEqual(t, s.firstAt, 16)
	})
	t.Run("profile", func(t *testing.T) {
		snap, err := s.tr.SnapshotOf(track.Filter{})
		require.NoError(t, err)
		var b bytes.Buffer
		require.NoError(t, pprofexport.Write(&b, snap))
		p, err := profile.Parse(&b)
		require.NoError(t, err)
		var inuse int64
		for _, smp := range p.Sample {
			if smp.Value[3] == 0 {
				continue
			}
			fn := smp.Location[0].Line[0].Function.Name
			assert.True(t, strings.HasSuffix(fn, adoptFunc), fn)
			assert.Equal(t, []string{"output"}, smp.Label["kind"])
			assert.Equal(t, []string{"lib:0"}, smp.Label["device"])
			inuse += smp.Value[3]
		}
		assert.Equal(t, int64(32*outputBytes), inuse)
	})
	t.Run("summary", func(t *testing.T) {
		var b strings.Builder
		require.NoError(t, report.WriteSummary(&b, s.tr, report.WithSources(report.Sources{Devices: []report.DeviceSource{s.lib.Device()}})))
		assert.Regexp(t, `(?m)^  lib:0\s+384 KiB\s+128 KiB\s+256 KiB\s`, b.String(),
			"the outputs are tensorlife's; the workspace is outside")
	})
	require.NoError(t, s.close())
	tracktest.VerifyNone(t, s.tr)
}

func TestFixedVariantReleasesEveryOutput(t *testing.T) {
	s := newTestSession(t, "-fixed", "-requests", "64")
	tracktest.VerifyNone(t, s.tr)
	assert.Nil(t, s.first, "no suspect")
	assert.Zero(t, s.tr.ReservedOn("lib:0"))
	free, total, err := s.lib.Device().MemInfo()
	require.NoError(t, err)
	assert.Equal(t, int64(workspaceBytes), total-free, "only the workspace is left")
	require.NoError(t, s.close())
}

func TestRunPrintsTheSummary(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run([]string{"-requests", "16"}, &out))
	assert.Contains(t, out.String(), "served 16 requests")
	assert.Contains(t, out.String(), adoptFunc+" (")
	_, err := parse([]string{"-requests", "0"})
	assert.Error(t, err)
}
