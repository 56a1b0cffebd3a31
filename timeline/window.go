package timeline

import (
	"sort"

	"github.com/tensorlife/tensorlife/track"
)

// completeAfter returns the time after which log holds every event that
// happened (all events with a later Time are in it), or -1 when it dropped
// nothing and so is complete since the tracker started.
func completeAfter(log *track.HistoryLog) int64 {
	if log.Dropped == 0 {
		return -1
	}
	return log.DroppedUntil
}

// firstAfter returns the index of the first event later than t.
func firstAfter(events []track.Event, t int64) int {
	return sort.Search(len(events), func(i int) bool { return events[i].Time > t })
}
