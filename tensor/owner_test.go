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
