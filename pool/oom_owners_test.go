package pool_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/mask"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
)

// holdLine returns the file:line of the line after the caller's, as an
// owner's description prints it.
func holdLine() string {
	_, _, line, _ := runtime.Caller(1)
	return fmt.Sprintf("oom_owners_test.go:%d", line+1)
}

// An out-of-memory error names who holds the memory when the tensors' own
// handles are gone: the line that made the View, the Retain or the cache
// entry that keeps it.
func TestOOMNamesTheOwnerHoldingTheMemory(t *testing.T) {
	for _, c := range []struct {
		name string
		// keep makes an extra owner of x and returns it, with the
		// description of the line that made it.
		keep func(t *testing.T, x *tensor.Tensor, cache *mask.Cache) (*tensor.Tensor, string)
	}{
		{"view", func(t *testing.T, x *tensor.Tensor, _ *mask.Cache) (*tensor.Tensor, string) {
			line := holdLine()
			v, err := x.View(0, 16)
			require.NoError(t, err)
			return v, "held by a View made at " + line
		}},
		{"retain", func(t *testing.T, x *tensor.Tensor, _ *mask.Cache) (*tensor.Tensor, string) {
			line := holdLine()
			r, err := x.Retain()
			require.NoError(t, err)
			return r, "held by a Retain made at " + line
		}},
		{"cache", func(t *testing.T, x *tensor.Tensor, cache *mask.Cache) (*tensor.Tensor, string) {
			line := holdLine()
			require.NoError(t, cache.Put(fmt.Sprint(x.ID()), x))
			return nil, "held by a " + mask.CacheOwner + " made at " + line
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dev := newFault(t, 4<<20)
			p, err := pool.New(dev, pool.Tracker(newTracker(t)), pool.Budget(256<<10))
			require.NoError(t, err)
			cache, err := mask.NewCache(mask.MaxBytes(1<<30), mask.CacheName("session"))
			require.NoError(t, err)
			var kept []*tensor.Tensor
			var oomErr error
			var want string
			made := 0
			for range 1000 {
				x, err := tensor.New(context.Background(), p, tensor.Float32, 1024)
				if err != nil {
					oomErr = err
					break
				}
				var k *tensor.Tensor
				k, want = c.keep(t, x, cache)
				if k != nil {
					kept = append(kept, k)
				}
				require.NoError(t, x.Free(), "the own handle is freed: only the owner keeps the memory")
				made++
			}
			var oom *tensor.OOMError
			require.ErrorAs(t, oomErr, &oom)
			require.NotEmpty(t, oom.TopSites)
			require.Len(t, oom.HeldBy, len(oom.TopSites))
			require.NotEmpty(t, oom.HeldBy[0], "the top site's memory is held by the owner")
			text := oomErr.Error()
			assert.Contains(t, text, "\n       "+want+" (", text)
			assert.Equal(t, made, oom.HeldBy[0][0].Live, "every tensor made is held by its owner")
			assert.Contains(t, text, fmt.Sprintf(", %d handles", made))
			t.Log(text)
			assert.Contains(t, text, "top live sites (tensor bytes, before the allocator rounds them)")

			for _, k := range kept {
				require.NoError(t, k.Free())
			}
			require.NoError(t, cache.Close())
		})
	}
}

// newRow allocates from one line for two callers, so two top sites share
// a headline.
//
//go:noinline
func newRow(t *testing.T, p *pool.Pool) *tensor.Tensor {
	x, err := tensor.New(context.Background(), p, tensor.Float32, 1024)
	if err != nil {
		return nil
	}
	return x
}

//go:noinline
func fromPrefill(t *testing.T, p *pool.Pool) *tensor.Tensor { return newRow(t, p) }

//go:noinline
func fromDecode(t *testing.T, p *pool.Pool) *tensor.Tensor { return newRow(t, p) }

// Two top sites with one line are told apart by the frame that differs,
// as every report tells them apart.
func TestOOMTellsRowsWithOneLineApart(t *testing.T) {
	dev := newFault(t, 4<<20)
	p, err := pool.New(dev, pool.Tracker(newTracker(t)), pool.Budget(256<<10))
	require.NoError(t, err)
	var live []*tensor.Tensor
	defer func() {
		for _, x := range live {
			require.NoError(t, x.Free())
		}
	}()
	for i := 0; ; i++ {
		from := fromPrefill
		if i%2 == 1 {
			from = fromDecode
		}
		x := from(t, p)
		if x == nil {
			break
		}
		live = append(live, x)
	}
	_, err = tensor.New(context.Background(), p, tensor.Float32, 1024)
	var oom *tensor.OOMError
	require.ErrorAs(t, err, &oom)
	require.Len(t, oom.TopSites, 2)
	text := err.Error()
	assert.Equal(t, 2, strings.Count(text, "pool_test.newRow\n"), text)
	t.Log(text)
	assert.Contains(t, text, "\n       via pool_test.fromPrefill (oom_owners_test.go:")
	assert.Contains(t, text, "\n       via pool_test.fromDecode (oom_owners_test.go:")
}
