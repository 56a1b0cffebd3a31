package pool

import (
	"testing"

	"github.com/tensorlife/tensorlife/internal/benchratio"
	"github.com/tensorlife/tensorlife/tensor"
)

// BenchmarkPoolHitSpreadRatio is a hit (Allocate+Release of a cached
// block) of a pool spread over its shards, as a pool is for the rest of its
// life once goroutines contended for a class lock, against a hit of a pool
// that never spread, in alternating rounds (goal: x-spread <= 1.1, a hit no
// dearer once the pool has spread). On a loaded 2-core machine it reads
// 1.05–1.2, most runs 1.06–1.09 (20–38 ns the hit before spreading): the
// goroutine reads its P's hint from its stack's slot of goroutineHints.
// Asking the sync.Pool of hints at every hit, as the pool did before,
// read 1.47–1.64 in the same runs.
func BenchmarkPoolHitSpreadRatio(b *testing.B) {
	newPool := func() *Pool {
		host, err := tensor.NewHostDevice(64 << 20)
		if err != nil {
			b.Fatal(err)
		}
		p, err := New(host, Untracked())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = p.Close() })
		return p
	}
	hit := func(p *Pool) func() {
		f := func() {
			blk, err := p.Allocate(4096)
			if err != nil {
				b.Fatal(err)
			}
			if err := p.Release(blk); err != nil {
				b.Fatal(err)
			}
		}
		f() // warm: the block is cached from now on
		return f
	}
	calm, spread := newPool(), newPool()
	if spread.shardMask == 0 {
		b.Skip("one shard on this machine: nothing to spread over")
	}
	spread.spread.Store(true) // what lockContended does when a class lock is held
	benchratio.Run(b, "spread", hit(spread), hit(calm), benchratio.BaselineName("calm"))
}
