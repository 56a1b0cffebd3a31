// Package benchratio measures one operation against a baseline inside one
// Go benchmark and reports their ratio, so that a speed goal reads "at most
// 0.25× runtime.Callers" rather than a number of nanoseconds that depends
// on the machine and on what else runs on it.
//
// Run alternates the two operations in rounds of a few hundred calls each
// (200 by default), times every round, and reports the median of the
// per-round ratios. Both sides of one ratio are measured within
// microseconds of each other, so a neighbour stealing the CPU, a frequency
// change or a GC cycle slows both or spoils one round, which the median
// discards; on a loaded two-core machine the ratio is stable to a few
// percent where ns/op of two separate benchmarks drifts by tens. Which
// operation goes first alternates from round to round, so neither gains
// from warm caches or loses to a pending GC assist.
//
// A baseline is only honest if it does the same work as the measured path
// apart from what is being measured: capture the same frames, start at the
// same depth. benchratio cannot check that; the benchmark must.
package benchratio

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// ErrInvalidOption is matched (errors.Is) by every error about an Option.
var ErrInvalidOption = errors.New("benchratio: invalid option")

// ErrNoRounds is returned by MedianRatio when no round can give a ratio:
// there are none, or every baseline round took no measurable time.
var ErrNoRounds = errors.New("benchratio: no round with a measurable baseline")

// Run times measured against baseline, each doing one operation per call,
// b.N operations each, in alternating rounds. It reports with
// b.ReportMetric:
//
//   - "x-<name>": the median over rounds of measured time / baseline time;
//   - "<name>-ns/op" and "<baseline>-ns/op": the median over rounds of each
//     one's time per operation (the baseline is called "baseline" unless
//     BaselineName says otherwise);
//   - "<name>-allocs/op" and "<baseline>-allocs/op": each one's heap
//     allocations per operation, measured before timing starts, with
//     testing.AllocsPerRun.
//
// The benchmark's own ns/op and allocs/op (Run calls b.ReportAllocs) cover
// one call of each. Both functions are called through a func value, which
// adds about a nanosecond to each side. An invalid option fails the
// benchmark (b.Fatal) with an error that matches ErrInvalidOption.
func Run(b *testing.B, name string, measured, baseline func(), opts ...Option) {
	b.Helper()
	cfg, err := newConfig(name, measured, baseline, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	measuredAllocs := testing.AllocsPerRun(cfg.roundOps, measured)
	baselineAllocs := testing.AllocsPerRun(cfg.roundOps, baseline)
	b.ResetTimer()
	rounds := runRounds(b.N, cfg.roundOps, measured, baseline, monotonic())
	b.StopTimer()
	metrics := summarize(name, cfg.baselineName, rounds)
	metrics[name+"-allocs/op"] = measuredAllocs
	metrics[cfg.baselineName+"-allocs/op"] = baselineAllocs
	for _, unit := range slices.Sorted(maps.Keys(metrics)) {
		b.ReportMetric(metrics[unit], unit)
	}
}

// summarize returns the timing metrics of Run by unit. Without a round
// that gives a ratio (the first, one-operation runs of a benchmark may
// have none) it returns no timing metric: the later, longer runs report.
func summarize(name, baselineName string, rounds []round) map[string]float64 {
	metrics := make(map[string]float64)
	ratio, err := medianRatio(rounds)
	if err != nil {
		return metrics
	}
	metrics["x-"+name] = ratio
	metrics[name+"-ns/op"] = medianPerOp(rounds, func(r round) time.Duration { return r.measured })
	metrics[baselineName+"-ns/op"] = medianPerOp(rounds, func(r round) time.Duration { return r.baseline })
	return metrics
}

// MedianRatio returns the median of measured[i]/baseline[i] over the rounds
// i whose baseline took measurable time. Both slices hold one duration per
// round, for the same number of operations on both sides. It is the
// statistic Run reports, exported for harnesses that time rounds
// themselves.
func MedianRatio(measured, baseline []time.Duration) (float64, error) {
	if len(measured) != len(baseline) {
		return 0, fmt.Errorf("benchratio: %d measured rounds, %d baseline rounds", len(measured), len(baseline))
	}
	rounds := make([]round, len(measured))
	for i := range rounds {
		rounds[i] = round{ops: 1, measured: measured[i], baseline: baseline[i]}
	}
	return medianRatio(rounds)
}

// round is one round's timing: ops calls of each function.
type round struct {
	ops                int
	measured, baseline time.Duration
}

// runRounds calls measured and baseline total times each, in rounds of
// roundOps (the last one shorter), measured first in even rounds and
// baseline first in odd ones, and times each side of each round with now.
func runRounds(total, roundOps int, measured, baseline func(), now func() time.Duration) []round {
	rounds := make([]round, 0, (total+roundOps-1)/roundOps)
	for done := 0; done < total; done += roundOps {
		r := round{ops: min(roundOps, total-done)}
		if len(rounds)%2 == 0 {
			r.measured = timeOps(r.ops, measured, now)
			r.baseline = timeOps(r.ops, baseline, now)
		} else {
			r.baseline = timeOps(r.ops, baseline, now)
			r.measured = timeOps(r.ops, measured, now)
		}
		rounds = append(rounds, r)
	}
	return rounds
}

func timeOps(n int, op func(), now func() time.Duration) time.Duration {
	start := now()
	for range n {
		op()
	}
	return now() - start
}

// monotonic returns a clock reading the monotonic time since its creation.
func monotonic() func() time.Duration {
	origin := time.Now()
	return func() time.Duration { return time.Since(origin) }
}

func medianRatio(rounds []round) (float64, error) {
	ratios := make([]float64, 0, len(rounds))
	for _, r := range rounds {
		if r.baseline > 0 {
			ratios = append(ratios, float64(r.measured)/float64(r.baseline))
		}
	}
	if len(ratios) == 0 {
		return 0, ErrNoRounds
	}
	return median(ratios), nil
}

// medianPerOp returns the median over rounds of side(r) per operation, in
// nanoseconds.
func medianPerOp(rounds []round, side func(round) time.Duration) float64 {
	perOp := make([]float64, len(rounds))
	for i, r := range rounds {
		perOp[i] = float64(side(r)) / float64(r.ops)
	}
	return median(perOp)
}

// median sorts xs and returns its middle value, or the mean of the two
// middle values of an even count. xs must not be empty.
func median(xs []float64) float64 {
	slices.Sort(xs)
	mid := len(xs) / 2
	if len(xs)%2 == 1 {
		return xs[mid]
	}
	return (xs[mid-1] + xs[mid]) / 2
}

// validUnit reports whether s can name a metric: b.ReportMetric units must
// not contain white space.
func validUnit(s string) bool {
	return s != "" && !strings.ContainsAny(s, " \t\n\r\v\f")
}
