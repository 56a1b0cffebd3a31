package pprofexport_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pprofexport"
	"github.com/tensorlife/tensorlife/track"
)

const pkgPath = "github.com/tensorlife/tensorlife/pprofexport_test."

// firstTopRow returns the function of go tool pprof -top's first row.
func firstTopRow(t *testing.T, out string) string {
	t.Helper()
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.Contains(l, "flat%") && i+1 < len(lines) {
			f := strings.Fields(lines[i+1])
			require.NotEmpty(t, f, out)
			return f[len(f)-1]
		}
	}
	t.Fatalf("no -top table in:\n%s", out)
	return ""
}

// allocKVMarked is an allocation helper that the tracker is told of.
//
//go:noinline
func allocKVMarked(tr *track.Tracker, n int64) *track.Record {
	r := &track.Record{Bytes: n, Meta: track.InternMeta("kv-cache", "host", "float16", nil)}
	if err := tr.Books().Record(context.Background(), r, 0); err != nil {
		panic(err)
	}
	return r
}

// allocKVUnmarked allocates from its own line: without a mark, every stack
// through it has it as its leaf.
//
//go:noinline
func allocKVUnmarked(tr *track.Tracker, n int64) *track.Record {
	r := &track.Record{Bytes: n, Meta: track.InternMeta("kv-cache", "host", "float16", nil)}
	if err := tr.Books().Record(context.Background(), r, 0); err != nil {
		panic(err)
	}
	return r
}

//go:noinline
func leakyDecode(tr *track.Tracker, kv func(*track.Tracker, int64) *track.Record) []*track.Record {
	var out []*track.Record
	for range 4 {
		out = append(out, kv(tr, 1<<20))
	}
	return out
}

//go:noinline
func boundedPrefill(tr *track.Tracker, kv func(*track.Tracker, int64) *track.Record) []*track.Record {
	return []*track.Record{kv(tr, 1<<10)}
}

func TestGoToolPprofTopNamesTheHelpersCaller(t *testing.T) {
	for _, tc := range []struct {
		name string
		kv   func(*track.Tracker, int64) *track.Record
		want string
	}{
		{"marked helper: its caller first", allocKVMarked, pkgPath + "leakyDecode"},
		{"unmarked: the helper first", allocKVUnmarked, pkgPath + "allocKVUnmarked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := track.New(track.HelperFunctions(pkgPath + "allocKVMarked"))
			require.NoError(t, err)
			recs := append(leakyDecode(tr, tc.kv), boundedPrefill(tr, tc.kv)...)
			path := filepath.Join(t.TempDir(), "kv.pb.gz")
			require.NoError(t, pprofexport.WriteFile(path, tr.Snapshot()))
			out, err := runPprof(t, "-top", path)
			require.NoError(t, err)
			assert.Equal(t, tc.want, firstTopRow(t, out), out)
			for _, r := range recs {
				require.NoError(t, r.Release())
			}
		})
	}
}
