package peak_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tensorlife/tensorlife/internal/peak"
)

func TestRaiseKeepsTheHighest(t *testing.T) {
	var p atomic.Int64
	peak.Raise(&p, 5)
	peak.Raise(&p, 3)
	assert.EqualValues(t, 5, p.Load(), "a lower value leaves the peak")
	peak.Raise(&p, -1)
	assert.EqualValues(t, 5, p.Load())

	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				peak.Raise(&p, int64(g*1000+i))
			}
		})
	}
	wg.Wait()
	assert.EqualValues(t, 7999, p.Load(), "concurrent raises leave the highest value")
}
