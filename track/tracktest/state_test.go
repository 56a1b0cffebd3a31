package tracktest_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/invariants"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

// heapInUse returns the bytes of live heap objects after a full collection.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC() // a second cycle frees what the first one's cleanups dropped
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// What a check remembers of a tracker dies with the tracker: a test binary
// that checks many trackers, one per test, stays flat. Each tracker holds
// a few hundred KiB, so 500 kept alive would be over 100 MiB.
func TestChecksKeepNoTrackerAlive(t *testing.T) {
	check := func() {
		tr, err := track.New()
		require.NoError(t, err)
		require.NoError(t, tracktest.Find(tr))
		tracktest.VerifyNone(t, tr)
	}
	check() // what the package keeps once, whatever it checks
	before := heapInUse()
	for range 500 {
		check()
	}
	grown := heapInUse() - before
	assert.Less(t, grown, int64(16<<20), "the heap grew by %d KiB over 500 checked trackers", grown>>10)
}

// A tracker's misuse cursor is its own: a check of one tracker moves no
// other's, so tests with trackers of their own never see each other's.
func TestMisuseCursorIsTheTrackers(t *testing.T) {
	a, b := newEnv(t, "a"), newEnv(t, "b")
	x := a.newTensor(t, context.Background(), 4)
	require.NoError(t, x.Free())
	err, _ := invariants.Recover(x.Free) // a misuse of a's alone; it panics in an invariants build
	require.Error(t, err)
	_, _, latest := a.tr.Books().MisuseSince(0)
	require.Positive(t, latest)
	_ = tracktest.Find(a.tr, tracktest.AllowMisuse())
	assert.Equal(t, latest, tracktest.Cursor(a.tr))
	assert.Zero(t, tracktest.Cursor(b.tr))
}
