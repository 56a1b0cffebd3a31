package tracktest_test

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	kept := tracktest.Cursors() // trackers other tests still hold, such as track.Default()
	for range 500 {
		check()
	}
	grown := heapInUse() - before
	assert.Less(t, grown, int64(16<<20), "the heap grew by %d KiB over 500 checked trackers", grown>>10)

	// The cursors of collected trackers go too. Cleanups run on their own
	// goroutine after a collection; give them collections, not time.
	for i := 0; i < 100 && tracktest.Cursors() > kept; i++ {
		runtime.GC()
		runtime.Gosched()
	}
	assert.LessOrEqual(t, tracktest.Cursors(), kept, "no cursor outlives its tracker")
}
