package timeline_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
)

// Each helper records from its own line, so each is its own site.

func newTracker(t testing.TB, opts ...track.Option) *track.Tracker {
	t.Helper()
	base := []track.Option{track.Name("test"), track.OnLeak(func(track.LeakReport) {})}
	tr, err := track.New(append(base, opts...)...)
	require.NoError(t, err)
	return tr
}

// allocMask is the leak: its allocations are kept.
func allocMask(t testing.TB, tr *track.Tracker, ctx context.Context, bytes int64) *track.Record {
	r := &track.Record{Bytes: bytes, Meta: track.InternMeta("mask", "", "", nil)}
	require.NoError(t, tr.Books().Record(ctx, r, 0))
	return r
}

// allocWeights is allocated once and held: a flat band.
func allocWeights(t testing.TB, tr *track.Tracker, ctx context.Context, bytes int64) *track.Record {
	r := &track.Record{Bytes: bytes, Meta: track.InternMeta("weights", "", "", nil)}
	require.NoError(t, tr.Books().Record(ctx, r, 0))
	return r
}

// allocLogits breathes: allocated and freed at every step.
func allocLogits(t testing.TB, tr *track.Tracker, ctx context.Context, bytes int64) *track.Record {
	r := &track.Record{Bytes: bytes, Meta: track.InternMeta("logits", "", "", nil)}
	require.NoError(t, tr.Books().Record(ctx, r, 0))
	return r
}

// op is one allocation or free the test made, in the order it made them.
type op struct {
	rec  *track.Record
	free bool
}

// run is a small leaking decode loop; it returns what it did, in order.
func run(t testing.TB, tr *track.Tracker, steps int) []op {
	ctx := track.WithLabels(context.Background(), "request", "r1")
	ops := []op{{rec: allocWeights(t, tr, ctx, 8<<10)}}
	for range steps {
		logits := allocLogits(t, tr, ctx, 2<<10)
		mask := allocMask(t, tr, ctx, 512)
		require.NoError(t, logits.Release())
		ops = append(ops, op{rec: logits}, op{rec: mask}, op{rec: logits, free: true})
	}
	return ops
}

// ledger knows the live bytes per allocating function at any time from the
// order of the test's own operations, independently of how the package
// rebuilds them: the history only says when each kept operation happened.
type ledger struct {
	ops  []op
	when []int64 // the operation's time; -1 if the history dropped it
}

func newLedger(log *track.HistoryLog, ops []op) *ledger {
	type key struct {
		id   uint64
		free bool
	}
	index := map[key]int{}
	l := &ledger{ops: ops, when: make([]int64, len(ops))}
	for i, o := range ops {
		index[key{o.rec.ID(), o.free}] = i
		l.when[i] = -1
	}
	for _, e := range log.Events {
		if e.Kind != track.EventAlloc && e.Kind != track.EventFree {
			continue
		}
		if i, ok := index[key{e.ID, e.Kind == track.EventFree}]; ok {
			l.when[i] = e.Time
		}
	}
	return l
}

// liveAt returns the live bytes per function at time at. Operations the
// history dropped have no known time, but each happened no later than the
// history's DroppedUntil, which is where a timeline with drops starts: so
// every dropped operation counts as done by then, and the test's program
// order (times only grow in it) puts the rest in place.
func (l *ledger) liveAt(t *testing.T, at int64) map[string]int64 {
	last := -1
	for i, w := range l.when {
		if w < 0 || w <= at {
			last = i
		}
	}
	for _, w := range l.when[last+1:] {
		assert.Greater(t, w, at, "a sample at %d precedes an operation the history dropped", at)
	}
	out := map[string]int64{}
	for _, o := range l.ops[:last+1] {
		b := o.rec.Bytes
		if o.free {
			b = -b
		}
		out[o.rec.Site().Location().Function] += b
	}
	return out
}

// stepClock is a tracker clock (track.Clock) that moves by step at each
// reading, as a workload's events are spread in time, and by advance when
// told: no test waits for real time to pass.
type stepClock struct {
	mu   sync.Mutex
	now  time.Time
	step time.Duration
}

// Now is the clock's time, then one step later.
func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now
	c.now = c.now.Add(c.step)
	return now
}

func (c *stepClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
