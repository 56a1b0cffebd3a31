package track_test

import (
	"context"
	"runtime"
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
	if err := tr.Books().Record(ctx, r, 0); err != nil {
		panic(err)
	}
	return r
}

// TestSiteFeedReadersKeepUpWithChurn reads two site feeds while 8
// goroutines record and release under requests that end, as a service's
// request goroutines do under a watcher and a metrics bridge. A request
// ended by its end function is a fact the moment the function returns:
// one read of each feed after a marker's request ended sees it, however
// records churn. (A request only labelled, whose context a reader finds
// done, may be seen a few readings later when more than a sweep's worth
// are open, as Tracker.Totals says; the churn's are such.) The
// readers read when told to, never in a loop that polls: a polling reader
// competes with the churn for the processor and, on a loaded machine or
// at -cpu 1, takes seconds of time slices to see each marker.
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
				runtime.Gosched() // churn, not a spin that starves the test's own goroutine at -cpu 1
			}
		})
	}

	// Each reader reads once per tick and sends the marker count it saw
	// outlived (0: none).
	tick := make([]chan struct{}, readers)
	seen := make([]chan int64, readers)
	var read sync.WaitGroup
	for r := range readers {
		tick[r], seen[r] = make(chan struct{}), make(chan int64)
		feed := tr.Books().NewSiteFeed()
		read.Go(func() {
			defer feed.Close()
			var buf []track.SiteStats
			for range tick[r] {
				buf = feed.Changed(buf[:0])
				got := int64(0)
				for _, s := range buf {
					if s.Site.UserFrames()[0].Function == "github.com/tensorlife/tensorlife/track_test.markerRecord" {
						got = s.OutlivedCount
					}
				}
				seen[r] <- got
			}
		})
	}

	var marks []*track.Record
	for m := range markers {
		ctx, end := track.WithRequest(context.Background())
		marks = append(marks, markerRecord(tr, track.WithLabels(ctx, "marker", strconv.Itoa(m))))
		end()
		for r := range readers {
			tick[r] <- struct{}{}
			assert.Equal(t, int64(m+1), <-seen[r], "reader %d sees marker %d in its first read after it ended", r, m)
		}
	}
	for r := range readers {
		close(tick[r])
	}
	read.Wait()
	close(stop)
	churn.Wait()
	release(t, tr, marks...)
}
