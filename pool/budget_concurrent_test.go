package pool_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
)

// highWaterDevice is a device that remembers the most bytes it ever had
// handed out at once: what a budget must never let past it.
type highWaterDevice struct {
	tensor.Device
	mu        sync.Mutex
	out, peak int64
}

func (d *highWaterDevice) Alloc(bytes int64) (tensor.DevicePtr, error) {
	ptr, err := d.Device.Alloc(bytes)
	if err == nil {
		d.mu.Lock()
		d.out += bytes
		d.peak = max(d.peak, d.out)
		d.mu.Unlock()
	}
	return ptr, err
}

func (d *highWaterDevice) Free(ptr tensor.DevicePtr, bytes int64) error {
	d.mu.Lock()
	d.out -= bytes
	d.mu.Unlock()
	return d.Device.Free(ptr, bytes)
}

func (d *highWaterDevice) high() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.peak
}

// fillConcurrently has workers goroutines allocate from p, each trying
// sizes largest first and keeping every block, until each has been refused
// even the smallest size; it returns every block held. Any error but an
// out-of-memory one fails the test.
func fillConcurrently(t *testing.T, p *pool.Pool, workers int, sizes []int64) []tensor.Block {
	t.Helper()
	held := make([][]tensor.Block, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for k := w; ; k++ {
				got := false
				// Start at a size of the worker's own, then go smaller.
				for j := k % len(sizes); j < len(sizes) && !got; j++ {
					b, err := p.Allocate(sizes[j])
					if err != nil {
						if !assert.ErrorIs(t, err, tensor.ErrOutOfMemory) {
							return
						}
						continue
					}
					held[w] = append(held[w], b)
					got = true
				}
				if !got {
					return // refused the smallest size
				}
			}
		})
	}
	wg.Wait()
	var all []tensor.Block
	for _, bs := range held {
		all = append(all, bs...)
	}
	return all
}

// TestBudgetExactUnderConcurrency fills a pool to its budget from many
// goroutines at once, round after round, with the cache of each round
// spread over the shards of the goroutines that freed it: the device never
// holds more than the budget, the blocks held fit in it, and an allocation
// is refused only when no block of the smallest size fits any more, so the
// budget is used to the last block.
func TestBudgetExactUnderConcurrency(t *testing.T) {
	const workers = 16
	for _, tc := range []struct {
		name  string
		sizes []int64 // largest first; multiples of 512, so exact class sizes
		opts  []pool.Option
	}{
		{"one-size", []int64{4096}, nil},
		{"mixed-sizes", []int64{64 << 10, 16 << 10, 4096, 512}, nil},
		{"capped-cache", []int64{16 << 10, 4096}, []pool.Option{pool.MaxCachedBytes(64 << 10)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const budget = 1<<20 + 300 // not a multiple of any size
			host, err := tensor.NewHostDevice(4 << 20)
			require.NoError(t, err)
			dev := &highWaterDevice{Device: host}
			p, err := pool.New(dev, append([]pool.Option{pool.Untracked(), pool.Budget(budget)}, tc.opts...)...)
			require.NoError(t, err)
			smallest := tc.sizes[len(tc.sizes)-1]
			for round := range 4 {
				blocks := fillConcurrently(t, p, workers, tc.sizes)
				var sum int64
				for _, b := range blocks {
					sum += b.Size
				}
				assert.LessOrEqual(t, sum, int64(budget), "round %d: the blocks held exceed the budget", round)
				assert.Less(t, budget-sum, smallest, "round %d: refused with room for a block left", round)
				assert.LessOrEqual(t, dev.high(), int64(budget), "round %d: the device held more than the budget", round)
				s := p.Stats()
				assert.Equal(t, sum, s.Active, "round %d", round)
				assert.LessOrEqual(t, s.PeakReserved, int64(budget), "round %d", round)

				// Free from as many goroutines, so that the next round finds
				// the cache spread over their shards.
				var wg sync.WaitGroup
				for w := range workers {
					wg.Go(func() {
						for i := w; i < len(blocks); i += workers {
							assert.NoError(t, p.Release(blocks[i]))
						}
					})
				}
				wg.Wait()
				s = p.Stats()
				assert.Zero(t, s.Active, "round %d", round)
				assert.Equal(t, s.Reserved, s.Cached, "round %d", round)
			}
			require.NoError(t, p.Close())
			assert.LessOrEqual(t, dev.high(), int64(budget))
		})
	}
}
