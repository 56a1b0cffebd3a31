package tracktest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

// benchT is a ScopeT that fails the benchmark on any report.
type benchT struct {
	b        *testing.B
	cleanups []func()
}

func (t *benchT) Error(args ...any) { t.b.Fatal(args...) }
func (t *benchT) Cleanup(f func())  { t.cleanups = append(t.cleanups, f) }
func (t *benchT) end() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
	t.cleanups = t.cleanups[:0]
}

// BenchmarkCleanCheck measures what a passing check costs a test, against
// the snapshot it is built on (the baseline), for a tracker that holds
// `live` tensors of other tests (scoped) or none (whole tracker).
func BenchmarkCleanCheck(b *testing.B) {
	for _, live := range []int{0, 1000} {
		e := newEnv(b, "bench")
		var others []*tensor.Tensor
		other := track.WithLabels(context.Background(), tracktest.ScopeLabel, "other#0")
		for range live {
			others = append(others, e.newTensor(b, other, 4))
		}
		scopeFilter := track.Filter{Labels: map[string]string{tracktest.ScopeLabel: "bench#0"}, Allocations: true}

		b.Run(fmt.Sprintf("live=%d/baseline-snapshot", live), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.tr.SnapshotOf(scopeFilter); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("live=%d/scope", live), func(b *testing.B) {
			b.ReportAllocs()
			t := &benchT{b: b}
			for b.Loop() {
				ctx := tracktest.Context(t, e.tr)
				x, err := tensor.New(ctx, e.alloc, tensor.Float32, 4)
				if err != nil {
					b.Fatal(err)
				}
				if err := x.Free(); err != nil {
					b.Fatal(err)
				}
				t.end()
			}
			if live > 0 {
				// A scope's check walks the whole live set: its cost per
				// tensor of other tests is what parallel suites pay.
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(live), "ns/other-live-tensor")
			}
		})
		if live == 0 {
			b.Run("live=0/VerifyNone", func(b *testing.B) {
				b.ReportAllocs()
				t := &benchT{b: b}
				for b.Loop() {
					tracktest.VerifyNone(t, e.tr)
				}
			})
		}
		for _, x := range others {
			require.NoError(b, x.Free())
		}
	}
}
