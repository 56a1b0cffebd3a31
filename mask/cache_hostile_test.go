package mask_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/mask"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/tensortest"
	"github.com/tensorlife/tensorlife/track"
)

// hostile is an allocator a cache's masks come from, made to misbehave
// by how.Do(act, method).
type hostile struct {
	alloc  tensor.Allocator
	how    *tensortest.Hostile
	method string
	tr     *track.Tracker
}

// thirdParty is an allocator of no package of tensorlife's whose Release
// calls its switch's UUID, which misbehaves unguarded.
type thirdParty struct {
	tensor.Allocator
	sw *tensortest.Hostile
}

func (a thirdParty) Release(b tensor.Block) error {
	a.sw.UUID()
	return a.Allocator.Release(b)
}

// hostileAllocators are the allocators a cache's masks may come from: a
// DeviceAllocator and a pool that caches nothing (so every release is a
// device Free), over a device whose Free misbehaves, and a third-party
// allocator whose own Release does.
func hostileAllocators(t *testing.T) map[string]func() hostile {
	mk := func(kind string) func() hostile {
		return func() hostile {
			host, err := tensor.NewHostDevice(1 << 20)
			require.NoError(t, err)
			dev := tensortest.NewHostile(host)
			tr, err := track.New(track.Logger(slog.New(slog.DiscardHandler)))
			require.NoError(t, err)
			switch kind {
			case "pool":
				p, err := pool.New(dev, pool.Tracker(tr), pool.MaxCachedBytes(0))
				require.NoError(t, err)
				return hostile{p, dev, "Free", tr}
			case "third party":
				a, err := tensor.NewDeviceAllocator(host, tr)
				require.NoError(t, err)
				return hostile{thirdParty{a, dev}, dev, "UUID", tr}
			}
			a, err := tensor.NewDeviceAllocator(dev, tr)
			require.NoError(t, err)
			return hostile{a, dev, "Free", tr}
		}
	}
	return map[string]func() hostile{
		"DeviceAllocator": mk("DeviceAllocator"), "pool": mk("pool"), "third party": mk("third party"),
	}
}

// fill makes masks of 1 KiB and puts each under its own key, k<from> to
// k<to-1>; it returns the first error, and stops there.
func fill(c *mask.Cache, alloc tensor.Allocator, from, to int) error {
	for i := from; i < to; i++ {
		m, err := tensor.New(context.Background(), alloc, tensor.Uint8, 1024)
		if err != nil {
			return err
		}
		err = c.Put("k"+strconv.Itoa(i), m)
		if err := errors.Join(err, m.Free()); err != nil {
			return err
		}
	}
	return nil
}

// No device call is made under the cache's lock, and the lock is let go
// on every path: an evicting Put whose device Free panics, calls
// runtime.Goexit or blocks leaves every reader of the cache free, and the
// owner's books are what the cache holds.
func TestCacheNeverHoldsItsLockAcrossADeviceCall(t *testing.T) {
	for name, mk := range hostileAllocators(t) {
		for _, act := range []tensortest.Act{tensortest.ActPanic, tensortest.ActGoexit, tensortest.ActBlock} {
			t.Run(name+"/"+map[tensortest.Act]string{tensortest.ActPanic: "panic", tensortest.ActGoexit: "goexit", tensortest.ActBlock: "block"}[act], func(t *testing.T) {
				h := mk()
				alloc, dev, tr := h.alloc, h.how, h.tr
				c, err := mask.NewCache(mask.MaxEntries(2), mask.CacheName("hostile"))
				require.NoError(t, err)
				require.NoError(t, fill(c, alloc, 0, 2))
				dev.Do(act, h.method)

				done := make(chan struct{})
				go func() {
					defer close(done)
					defer func() { _ = recover() }() // a panic propagates to Put's caller
					_ = fill(c, alloc, 2, 4)         // evicts k0, then k1: the release misbehaves
				}()
				if act == tensortest.ActBlock {
					<-dev.Entered() // the evicting Put is inside the device's Free
				} else {
					<-done
				}
				// Readers go on meanwhile.
				got, ok := c.Get("k1")
				if ok {
					require.NoError(t, got.Free())
				}
				_ = c.Stats()
				assertOwnerIsTheCache(t, tr, c)
				if act == tensortest.ActBlock {
					dev.Unblock()
					<-done
				}
				dev.Do(act)
				assertOwnerIsTheCache(t, tr, c)
				require.NoError(t, c.Close())
				assert.Zero(t, c.Stats().Entries)
			})
		}
	}
}

// assertOwnerIsTheCache checks that the cache's owner holds exactly the
// masks the cache does.
func assertOwnerIsTheCache(t *testing.T, tr *track.Tracker, c *mask.Cache) {
	t.Helper()
	var held int64
	for _, o := range tr.Owners() {
		if o.Name == "hostile" {
			held = o.Count
		}
	}
	assert.Equal(t, c.Stats().Entries, held, "the owner's books are the cache's")
}
