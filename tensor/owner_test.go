package tensor_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// store is a service's own cache: it owns its handles and the track.Owner
// they are handed to.
type store struct {
	owner track.Owner
	items []*tensor.Tensor
}

// TestDroppedOwningStructIsFound guards that an owner never keeps itself
// alive through what it owns: a struct holding its handles and its own
// Owner, dropped without freeing them, is collected, and each handle is
// reported dropped; none that is still held is.
func TestDroppedOwningStructIsFound(t *testing.T) {
	for _, reclaim := range []bool{true, false} {
		t.Run(map[bool]string{true: "reclaim", false: "keep"}[reclaim], func(t *testing.T) {
			reports := make(chan track.LeakReport, 200)
			tr, err := track.New(track.ReclaimLeaks(reclaim), track.OnLeak(func(l track.LeakReport) { reports <- l }))
			require.NoError(t, err)
			dev, err := tensor.NewHostDevice(16 << 20)
			require.NoError(t, err)
			alloc, err := tensor.NewDeviceAllocator(dev, tr)
			require.NoError(t, err)

			kept := &store{owner: track.Owner{Name: "kept", MaxBytes: 1 << 20}}
			fill := func(s *store, n int) {
				for range n {
					x, err := tensor.New(context.Background(), alloc, tensor.Float32, 16)
					require.NoError(t, err)
					require.NoError(t, x.HandTo(&s.owner))
					s.items = append(s.items, x)
				}
			}
			fill(kept, 10)
			func() {
				dropped := &store{owner: track.Owner{Name: "dropped", MaxBytes: 1 << 20}}
				fill(dropped, 100)
			}()

			var got []track.LeakReport
			for cycle := 0; len(got) < 100 && cycle < 10; cycle++ {
				collect() // the handles' finalizers have reported by its return
				for len(reports) > 0 {
					got = append(got, <-reports)
				}
			}
			require.Len(t, got, 100, "every dropped handle is reported")
			collect()
			select {
			case l := <-reports:
				t.Fatalf("a held tensor was reported: %d", l.ID)
			default:
			}
			assert.Equal(t, int64(100), tr.Totals().GCLeaks)
			owners := tr.Owners()
			require.NotEmpty(t, owners)
			assert.Equal(t, "kept", owners[0].Name)
			assert.Equal(t, int64(10), owners[0].Count)
			for _, x := range kept.items {
				require.NoError(t, x.Free())
			}
			runtime.KeepAlive(kept)
		})
	}
}

// ownedAllocator is a tracked host allocator for the owner tests.
func ownedAllocator(t *testing.T) (*track.Tracker, tensor.Allocator) {
	t.Helper()
	tr, err := track.New()
	require.NoError(t, err)
	dev, err := tensor.NewHostDevice(16 << 20)
	require.NoError(t, err)
	alloc, err := tensor.NewDeviceAllocator(dev, tr)
	require.NoError(t, err)
	return tr, alloc
}

// TestInlineOwnerLivesAsLongAsWhatItHolds: an owner made inline, as the
// README shows, is kept reachable by the handle it was handed through, so
// collections change nothing: it holds the tensor, and the snapshot names
// it, until the tensor is freed.
func TestInlineOwnerLivesAsLongAsWhatItHolds(t *testing.T) {
	tr, alloc := ownedAllocator(t)
	x, err := tensor.New(context.Background(), alloc, tensor.Float32, 1024)
	require.NoError(t, err)
	require.NoError(t, x.HandTo(&track.Owner{Name: "sessions"}))
	runtime.GC()
	runtime.GC()
	owners := tr.Owners()
	require.Len(t, owners, 1)
	assert.Equal(t, "sessions", owners[0].Name)
	assert.False(t, owners[0].Dropped, "the owner lives while its handle does")
	assert.Equal(t, int64(4096), owners[0].Bytes)
	allocs := tr.Snapshot().Allocations
	require.Len(t, allocs, 1)
	require.NotNil(t, allocs[0].Owner, "the snapshot names the owner")
	assert.Equal(t, "sessions", allocs[0].Owner.Name)
	require.NoError(t, x.Free())
	assert.Empty(t, tr.Owners())
}

// TestTwoHandlesTwoOwners: x handed to A and its retain r to B; r's
// HandBack ends B's hold alone, and A holds the tensor until x lets go.
func TestTwoHandlesTwoOwners(t *testing.T) {
	tr, alloc := ownedAllocator(t)
	a, b := &track.Owner{Name: "a", MaxBytes: 1 << 20}, &track.Owner{Name: "b", MaxBytes: 1 << 20}
	ctx, end := track.WithRequest(context.Background())
	x, err := tensor.New(ctx, alloc, tensor.Float32, 16)
	require.NoError(t, err)
	r, err := x.Retain()
	require.NoError(t, err)
	end()
	require.NoError(t, x.HandTo(a))
	require.NoError(t, r.HandTo(b))
	require.Len(t, tr.Owners(), 2)
	require.NoError(t, r.HandBack())
	owners := tr.Owners()
	require.Len(t, owners, 1, "B let go")
	assert.Equal(t, "a", owners[0].Name, "A holds what it was handed")
	assert.Zero(t, tr.Totals().OutlivedBytes, "A holds it: not outlived")
	require.NoError(t, r.Free())
	assert.Len(t, tr.Owners(), 1, "freeing another handle never moves it")
	require.NoError(t, x.HandBack())
	assert.Equal(t, int64(64), tr.Totals().OutlivedBytes, "no owner: its ended request's")
	require.NoError(t, x.Free())
}

// TestHandBackWithoutHandToIsMisuse, tracked or not.
func TestHandBackWithoutHandToIsMisuse(t *testing.T) {
	_, alloc := ownedAllocator(t)
	dev, err := tensor.NewHostDevice(1 << 20)
	require.NoError(t, err)
	plain, err := tensor.NewDeviceAllocator(dev, nil)
	require.NoError(t, err)
	for _, a := range []tensor.Allocator{alloc, plain} {
		x, err := tensor.New(context.Background(), a, tensor.Float32, 4)
		require.NoError(t, err)
		assert.ErrorIs(t, x.HandBack(), track.ErrMisuse)
		assert.ErrorIs(t, x.HandTo(nil), track.ErrMisuse)
		require.NoError(t, x.HandTo(&track.Owner{Name: "o"}))
		require.NoError(t, x.HandBack())
		assert.ErrorIs(t, x.HandBack(), track.ErrMisuse, "once")
		require.NoError(t, x.Free())
	}
}
