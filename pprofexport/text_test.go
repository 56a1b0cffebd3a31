package pprofexport_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tensorlife/tensorlife/pprofexport"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// inGoroutine runs f on a goroutine of its own, so the stacks it records end
// in this file rather than in the standard library, whose lines change with
// every Go release. (sync.WaitGroup.Go would add a frame of its own.)
func inGoroutine(f func() ([]*tensor.Tensor, error)) ([]*tensor.Tensor, error) {
	var (
		wg  sync.WaitGroup
		out []*tensor.Tensor
		err error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		out, err = f()
	}()
	wg.Wait()
	return out, err
}

// fixTimes gives a snapshot fixed times: it was taken at 2026-01-02 03:04:05
// UTC and each site's oldest tensor is a minute and a half older than the
// previous site's.
func fixTimes(snap *track.Snapshot) *track.Snapshot {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	fixed := *snap
	fixed.Time = at
	fixed.Sites = append([]track.SiteStats(nil), snap.Sites...)
	for i := range fixed.Sites {
		if !fixed.Sites[i].Oldest.IsZero() {
			fixed.Sites[i].Oldest = at.Add(-time.Duration(i+1) * 90 * time.Second)
		}
	}
	return &fixed
}

func TestWriteTextGolden(t *testing.T) {
	prog := newProgram(t)
	ctx := track.WithLabels(context.Background(), "request", "r1")
	masks, err := inGoroutine(func() ([]*tensor.Tensor, error) { return buildMasks(ctx, prog.alloc, 3) })
	prog.live = append(prog.live, masks...)
	require.NoError(t, err)
	kv, err := inGoroutine(func() ([]*tensor.Tensor, error) { return buildKV(ctx, prog.alloc, 2) })
	prog.live = append(prog.live, kv...)
	require.NoError(t, err)
	churned, err := inGoroutine(func() ([]*tensor.Tensor, error) { return buildMasks(ctx, prog.alloc, 2) })
	require.NoError(t, err)
	for _, m := range churned {
		require.NoError(t, m.Free())
	}

	tests := []struct {
		name   string
		filter track.Filter
	}{
		{"debug1", track.Filter{}},
		{"debug1_filtered", track.Filter{Kind: "kv-cache", MinAge: time.Nanosecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap, err := prog.tracker.SnapshotOf(tt.filter)
			require.NoError(t, err)
			var buf bytes.Buffer
			require.NoError(t, pprofexport.WriteText(&buf, fixTimes(snap)))

			// Paths differ between machines; the golden file says $DIR.
			wd, err := os.Getwd()
			require.NoError(t, err)
			got := strings.ReplaceAll(buf.String(), wd, "$DIR")

			golden := filepath.Join("testdata", tt.name+".golden")
			if *update {
				require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run go test -run TestWriteTextGolden -update to create it")
			assert.Equal(t, string(want), got)
		})
	}
}
