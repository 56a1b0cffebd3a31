package pool_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/tensortest"
)

// churnResult is what one churn run did.
type churnResult struct {
	allocs, failures atomic.Int64
}

// churn has workers goroutines make and free tensors of random sizes through
// p, each holding up to hold tensors at once, while another goroutine reads
// Stats and empties the cache. Every failure must be an error matching one
// of allowed; anything else fails the test.
func churn(t *testing.T, p *pool.Pool, workers, rounds, hold int, seed uint64, allowed ...error) *churnResult {
	t.Helper()
	var res churnResult
	ctx := context.Background()
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var errList []error
	report := func(err error) {
		errMu.Lock()
		errList = append(errList, err)
		errMu.Unlock()
	}
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			var held []*tensor.Tensor
			defer func() {
				for _, x := range held {
					if err := x.Free(); err != nil {
						report(err)
					}
				}
			}()
			for range rounds {
				if len(held) == hold || (len(held) > 0 && rng.IntN(2) == 0) {
					i := rng.IntN(len(held))
					if err := held[i].Free(); err != nil {
						report(err)
						return
					}
					held[i] = held[len(held)-1]
					held = held[:len(held)-1]
					continue
				}
				// Mostly small sizes, sometimes a medium or large class.
				n := 1 + rng.IntN(8<<10)
				if rng.IntN(8) == 0 {
					n = 1 + rng.IntN(300<<10)
				}
				res.allocs.Add(1)
				x, err := tensor.New(ctx, p, tensor.Uint8, n)
				if err != nil {
					res.failures.Add(1)
					if !matchesAny(err, allowed) {
						report(err)
						return
					}
					continue
				}
				held = append(held, x)
			}
		})
	}
	stop := make(chan struct{})
	var watcher sync.WaitGroup
	watcher.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			s := p.Stats()
			if s.Reserved < 0 || s.Active < 0 || s.Cached < 0 {
				report(errors.New("negative pool figures"))
				return
			}
			if i%16 == 0 {
				if err := p.EmptyCache(); err != nil {
					report(err)
					return
				}
			}
		}
	})
	wg.Wait()
	close(stop)
	watcher.Wait()
	for _, err := range errList {
		t.Errorf("churn: %v", err)
	}
	return &res
}

func matchesAny(err error, targets []error) bool {
	for _, target := range targets {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// TestConcurrentChurn runs many goroutines through one pool (run it with
// -race) and checks that the books balance at the end.
func TestConcurrentChurn(t *testing.T) {
	cases := []struct {
		name string
		opts []pool.Option
	}{
		{"unbounded cache", nil},
		{"budget and cache cap", []pool.Option{pool.Budget(3 << 20), pool.MaxCachedBytes(512 << 10)}},
		{"no cache", []pool.Option{pool.MaxCachedBytes(0)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dev := newFault(t, 6<<20)
			p := newPool(t, dev, tc.opts...)
			res := churn(t, p, 8, 400, 4, 1)

			s := requireBalanced(t, p, dev)
			assert.Zero(t, s.Active, "every tensor was freed")
			assert.Zero(t, s.ActiveBlocks)
			assert.Zero(t, res.failures.Load(), "8 workers holding 4 tensors of at most 300 KiB fit: %+v", s)
			assert.Equal(t, res.allocs.Load(), s.Hits+s.Misses)
			assert.Equal(t, s.Misses, s.DeviceAllocs)
			assert.Zero(t, s.BadReleases)
			assert.Zero(t, p.Tracker().Totals().LiveCount)

			require.NoError(t, p.Close())
			blocks, bytes := dev.Outstanding()
			assert.Zero(t, bytes, "leaked device bytes after Close")
			assert.Zero(t, blocks)
		})
	}
}

// TestRandomFaults fails a random fraction of device allocations, on one
// goroutine and on many: every failure must surface as an error (an
// injected out-of-memory failure only when the retry fails too), and the
// pool's books must match the device's at every quiet point.
func TestRandomFaults(t *testing.T) {
	cases := []struct {
		name     string
		fraction float64
		seed     uint64
		workers  int
		oom      bool // injected failures match tensor.ErrOutOfMemory
	}{
		{"10% OOM, serial", 0.1, 1, 1, true},
		{"50% OOM, serial", 0.5, 2, 1, true},
		{"30% OOM, concurrent", 0.3, 3, 6, true},
		{"30% driver errors, concurrent", 0.3, 4, 6, false},
		{"every allocation fails", 1, 5, 4, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := []tensortest.FaultOption{tensortest.FailFraction(tc.fraction, tc.seed)}
			allowed := []error{tensor.ErrOutOfMemory}
			if !tc.oom {
				opts = append(opts, tensortest.WithoutOOM())
				allowed = []error{tensortest.ErrInjected}
			}
			dev := newFault(t, 6<<20, opts...)
			p := newPool(t, dev, pool.MaxCachedBytes(256<<10))

			var failures int64
			for round := range 3 {
				before := p.Stats()
				res := churn(t, p, tc.workers, 200, 4, tc.seed+uint64(round), allowed...)
				failures += res.failures.Load()
				s := requireBalanced(t, p, dev)
				assert.Zero(t, s.Active)
				assert.Equal(t, res.allocs.Load(), s.Hits+s.Misses-before.Hits-before.Misses)
				assert.Zero(t, p.Tracker().Totals().LiveCount)
			}
			s := p.Stats()
			// The device is large enough that every failure is injected.
			assert.Equal(t, dev.Allocs(), s.DeviceAllocs+dev.Injected(), "device calls the pool did not account for")
			if tc.oom {
				assert.Equal(t, s.OOMs, failures, "every failed allocation is one OOM")
				assert.LessOrEqual(t, 2*failures, dev.Injected(), "an OOM is reported only after a failed retry")
			} else {
				assert.Equal(t, dev.Injected(), failures, "driver errors are passed on, not retried")
				assert.Zero(t, s.OOMs)
			}
			if tc.fraction >= 0.3 {
				assert.Positive(t, failures)
			}
			require.NoError(t, p.Close())
			blocks, bytes := dev.Outstanding()
			assert.Zero(t, bytes, "leaked device bytes after Close")
			assert.Zero(t, blocks)
		})
	}
}

// Frees racing with Close must neither leak nor be cached after Close.
func TestReleaseRacingClose(t *testing.T) {
	dev := newFault(t, 4<<20)
	p := newPool(t, dev)
	ctx := context.Background()
	var held []*tensor.Tensor
	for i := range 64 {
		x, err := tensor.New(ctx, p, tensor.Uint8, 512*(1+i%8))
		require.NoError(t, err)
		held = append(held, x)
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < len(held); i += 4 {
				assert.NoError(t, held[i].Free())
			}
		})
	}
	err := p.Close()
	if err != nil {
		assert.ErrorIs(t, err, pool.ErrActiveBlocks)
	}
	wg.Wait()
	s := requireBalanced(t, p, dev)
	assert.Zero(t, s.Reserved)
	blocks, bytes := dev.Outstanding()
	assert.Zero(t, bytes)
	assert.Zero(t, blocks)
}
