package track_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tensorlife/tensorlife/track"
)

// recordOne records from a line of its own.
//
//go:noinline
func recordOne(tr *track.Tracker) *track.Record {
	r := &track.Record{Bytes: 64, Meta: track.InternMeta("tensor", "host", "uint8", []int{64})}
	if err := tr.Books().Record(context.Background(), r, 0); err != nil {
		panic(err)
	}
	return r
}

// A site's live count is two counters, made and released; a reader reads
// them at one moment, however fast a line makes and releases. A line that
// holds one record at a time reads as holding at most one, while another
// goroutine records and releases there without pause.
func TestASitesLiveCountIsReadAtOneMoment(t *testing.T) {
	tr := newTracker(t)
	site := recordOne(tr)
	s := site.Site()
	release(t, tr, site)
	var stop atomic.Bool
	var churn sync.WaitGroup
	churn.Go(func() {
		for !stop.Load() {
			r := recordOne(tr)
			if err := r.Release(); err != nil {
				panic(err)
			}
		}
	})
	worst := int64(0)
	for range 20000 {
		st := s.Stats()
		worst = max(worst, st.LiveCount)
		assert.GreaterOrEqual(t, st.LiveBytes, int64(0))
		if st.LiveCount > 1 {
			break
		}
	}
	stop.Store(true)
	churn.Wait()
	assert.LessOrEqual(t, worst, int64(1), "one record at a time")
}
