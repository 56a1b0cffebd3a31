package pprofexport

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/tensorlife/tensorlife/internal/benchratio"
	"github.com/tensorlife/tensorlife/track"
)

// BenchmarkLabelKeysGroupsApart measures what the handler's profile by a
// label key costs with its groups read apart from the snapshot
// (Books.GroupsOf, each written as it is read) against the same profile
// of a snapshot that holds them all (SnapshotOf, as the handler took it
// before), in alternating rounds: each side walks the live set, sorts its
// groups and compresses the profile into the handler's body. It reports
// each side's MiB allocated and seconds per profile (the medians over
// rounds) and the ratios, apart over held (x-apart-MiB, the median of
// per-round ratios for x-apart-s). With "+model", each tensor also holds
// a label the profile does not show.
func BenchmarkLabelKeysGroupsApart(b *testing.B) {
	for _, bc := range []struct {
		n     int
		model bool
	}{{200_000, false}, {1_000_000, false}, {200_000, true}} {
		name := fmt.Sprintf("%dk-requests", bc.n/1000)
		if bc.model {
			name += "+model"
		}
		b.Run(name, func(b *testing.B) {
			tr := labelledTracker(b, bc.n, bc.model)
			cfg, err := newProfileConfig([]ProfileOption{LabelKeys("request")})
			if err != nil {
				b.Fatal(err)
			}
			f := track.Filter{LabelKeys: []string{"request"}}
			held := func() error {
				snap, err := tr.SnapshotOf(f)
				if err != nil {
					return err
				}
				return compress(&chunks{}, func(zw io.Writer) error { return stream(zw, snap, cfg) })
			}
			apart := func() error {
				snap, groups, err := tr.Books().GroupsOf(f)
				if err != nil {
					return err
				}
				return compress(&chunks{}, func(zw io.Writer) error { return streamGroups(zw, snap, groups.All(), cfg) })
			}
			var heldT, apartT []time.Duration
			var heldMiB, apartMiB []float64
			b.ResetTimer()
			for i := range b.N {
				sides := []func(){
					func() { d, m := allocatedBy(b, held); heldT, heldMiB = append(heldT, d), append(heldMiB, m) },
					func() { d, m := allocatedBy(b, apart); apartT, apartMiB = append(apartT, d), append(apartMiB, m) },
				}
				if i%2 == 1 {
					slices.Reverse(sides)
				}
				for _, side := range sides {
					side()
				}
			}
			b.StopTimer()
			ratio, err := benchratio.MedianRatio(apartT, heldT)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(median(heldMiB), "held-MiB/op")
			b.ReportMetric(median(apartMiB), "apart-MiB/op")
			b.ReportMetric(medianDuration(heldT).Seconds(), "held-s/op")
			b.ReportMetric(medianDuration(apartT).Seconds(), "apart-s/op")
			b.ReportMetric(median(apartMiB)/median(heldMiB), "x-apart-MiB")
			b.ReportMetric(ratio, "x-apart-s")
		})
	}
}

// allocatedBy runs f after a collection and returns how long it took and
// the MiB it allocated.
func allocatedBy(b *testing.B, f func() error) (time.Duration, float64) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	if err := f(); err != nil {
		b.Fatal(err)
	}
	d := time.Since(start)
	runtime.ReadMemStats(&after)
	return d, float64(after.TotalAlloc-before.TotalAlloc) / (1 << 20)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func medianDuration(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// labelledTracker returns a tracker whose n live tensors each carry a
// request id of their own, and with model a label the profile does not
// show, released when b ends.
func labelledTracker(b *testing.B, n int, model bool) *track.Tracker {
	b.Helper()
	tr, err := track.New(track.Name("labelled"))
	if err != nil {
		b.Fatal(err)
	}
	recs := make([]track.Record, n)
	meta := track.InternMeta("activation", "host", "float16", []int{64})
	for i := range recs {
		kv := []string{"request", fmt.Sprintf("req-%08d", i)}
		if model {
			kv = append(kv, "model", "llama")
		}
		recs[i].Bytes, recs[i].Meta = 128, meta
		if err := tr.Books().Record(track.WithLabels(context.Background(), kv...), &recs[i], 0); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() {
		for i := range recs {
			if err := (&recs[i]).Release(); err != nil {
				b.Error(err)
			}
		}
	})
	return tr
}
