package pool

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
)

func TestGoroutineHintKeepsTheHintItsPGave(t *testing.T) {
	block := stackBlock()
	h := refreshHint(block)
	got, ok := goroutineHint(block)
	require.True(t, ok, "a goroutine's slot holds its own block after it asked")
	assert.Equal(t, h, got)
	assert.Less(t, got, uint32(1<<hintBits))

	// Another stack whose block takes the same slot: the first goroutine
	// no longer finds its own there, and asks again.
	other := block + hintSlots
	require.Equal(t, hintSlot(block), hintSlot(other))
	refreshHint(other)
	_, ok = goroutineHint(block)
	assert.False(t, ok, "a slot another stack took is not the goroutine's hint")
	_, ok = goroutineHint(other)
	assert.True(t, ok)
}

func TestLiveGoroutinesHaveStackBlocksOfTheirOwn(t *testing.T) {
	// No two live goroutines' stacks share a block, so no two find each
	// other's hint in one slot. A goroutine whose stack moved between two
	// looks (the runtime grows and shrinks stacks by copying them) says
	// nothing: its old block may be another's since.
	const n = 64
	seen := make(map[uint64]bool, n)
	for try := 0; len(seen) == 0 && try < 100; try++ {
		before, after := make([]uint64, n), make([]uint64, n)
		var looked, finished sync.WaitGroup
		looked.Add(n)
		finished.Add(n)
		release := make(chan struct{})
		for i := range n {
			go func() {
				defer finished.Done()
				growStack(16) // a stack that need not grow again below
				before[i] = stackBlock()
				looked.Done()
				<-release // alive until every goroutine looked
				after[i] = stackBlock()
			}()
		}
		looked.Wait()
		close(release)
		finished.Wait()
		for i, b := range before {
			if after[i] != b {
				continue
			}
			assert.False(t, seen[b], "block %#x is two live goroutines'", b)
			seen[b] = true
		}
	}
	assert.NotEmpty(t, seen, "every stack moved at every try")
}

func TestSpreadPoolAllocatesFromTheShardOfTheGoroutinesHint(t *testing.T) {
	// Whatever hint a goroutine's slot holds (up to 255, past any pool's
	// shards), an allocation of a spread pool draws from the shard of that
	// hint modulo the shards, and the books stay exact.
	host, err := tensor.NewHostDevice(1 << 20)
	require.NoError(t, err)
	p, err := New(host, Untracked())
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	p.spread.Store(true)
	for h := range uint32(1 << hintBits) {
		// A stack the runtime moved in between (a collection shrinks
		// stacks) says nothing: the allocation is tried again.
		home, moved := uint32(0), true
		for try := 0; moved && try < 100; try++ {
			done := make(chan struct{})
			go func() {
				defer close(done)
				growStack(64) // so that the stack need not grow under Allocate
				// Allocate's frame is a few hundred bytes below this
				// one: set the hint of every block it may lie in.
				base := stackBlock()
				for d := range uint64(8) {
					goroutineHints[hintSlot(base-d)].Store((base-d)<<hintBits | uint64(h))
				}
				blk, err := p.Allocate(4096)
				if !assert.NoError(t, err) {
					return
				}
				moved = stackBlock() != base
				home = homeShard(p.slots.get(uint32(blk.Tag) >> genBits).home.Load())
				assert.NoError(t, p.Release(blk))
			}()
			<-done
		}
		require.False(t, moved, "hint %d: the stack moved at every try", h)
		assert.Equal(t, h&p.shardMask, home, "hint %d", h)
	}
	st := p.Stats()
	assert.Zero(t, st.Active)
	_, size, _ := classOf(4096)
	assert.Equal(t, size, st.Reserved, "one block, moved from shard to shard")
}

// growStack grows the calling goroutine's stack past n KiB.
//
//go:noinline
func growStack(n int) byte {
	var buf [1024]byte
	buf[n%len(buf)] = byte(n)
	if n == 0 {
		return buf[0]
	}
	return growStack(n-1) + buf[n%len(buf)]
}
