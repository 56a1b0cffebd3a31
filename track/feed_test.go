package track_test

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tensorlife/tensorlife/track"
)

// markerRecord records from a line no churning goroutine uses, so its site
// is the marker's alone.
//
//go:noinline
func markerRecord(tr *track.Tracker, ctx context.Context) *track.Record {
	r := &track.Record{Bytes: 4096, Meta: track.InternMeta("marker", "host", "float32", []int{1024})}
	if err := tr.Record(ctx, r, 0); err != nil {
		panic(err)
	}
	return r
}

// TestSiteFeedReadersKeepUpWithChurn reads two site feeds while 8
// goroutines record and release under requests that end, as a service's
// request goroutines do under a watcher and a metrics bridge: each reader
// must see, at some read, every marker request that ended, one after the
// other. A reader that starved behind the record path would never see the
// next marker and the test would hang; nothing here waits on a clock.
func TestSiteFeedReadersKeepUpWithChurn(t *testing.T) {
	tr := newTracker(t)
	const churners, readers, markers = 8, 2, 20
	if testing.Short() {
		t.Skip("churn")
	}
	stop := make(chan struct{})
	var churn sync.WaitGroup
	for g := range churners {
		churn.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithCancel(context.Background())
				ctx = track.WithLabels(ctx, "request", strconv.Itoa(g)+"-"+strconv.Itoa(i))
				a, b := recordA(tr, ctx, 8, "tensor"), recordB(tr, ctx, 16)
				cancel() // ended holding both: they outlive it until released
				release(t, tr, a, b)
			}
		})
	}

	// seen[r] receives the marker count each reader has seen outlived.
	seen := make([]chan int64, readers)
	var read sync.WaitGroup
	for r := range readers {
		seen[r] = make(chan int64)
		feed := tr.NewSiteFeed()
		read.Go(func() {
			defer feed.Close()
			var buf []track.SiteStats
			want := int64(1)
			for want <= markers {
				buf = feed.Changed(buf[:0])
				for _, s := range buf {
					if s.Site.UserFrames()[0].Function == "github.com/tensorlife/tensorlife/track_test.markerRecord" &&
						s.OutlivedCount >= want {
						seen[r] <- s.OutlivedCount
						want = s.OutlivedCount + 1
					}
				}
			}
		})
	}

	var marks []*track.Record
	for m := range markers {
		ctx, cancel := context.WithCancel(context.Background())
		marks = append(marks, markerRecord(tr, track.WithLabels(ctx, "marker", strconv.Itoa(m))))
		cancel()
		for r := range readers {
			assert.Equal(t, int64(m+1), <-seen[r], "reader %d sees marker %d once it ended", r, m)
		}
	}
	read.Wait()
	close(stop)
	churn.Wait()
	release(t, tr, marks...)
}
