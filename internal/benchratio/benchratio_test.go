package benchratio

import (
	"flag"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{7}, 7},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{1, 1000, 2, 3, 2}, 2}, // an outlier does not move it
	} {
		assert.Equal(t, tc.want, median(tc.xs), "%v", tc.xs)
	}
}

func TestMedianRatio(t *testing.T) {
	ms := func(xs ...int) []time.Duration {
		out := make([]time.Duration, len(xs))
		for i, x := range xs {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	// A GC pause in round 3 spoils one ratio; the median ignores it.
	ratio, err := MedianRatio(ms(30, 31, 500, 29, 30), ms(10, 10, 10, 10, 10))
	require.NoError(t, err)
	assert.InDelta(t, 3.0, ratio, 1e-9)

	// A round with a baseline too short to measure gives no ratio.
	ratio, err = MedianRatio(ms(30, 5, 60), ms(10, 0, 20))
	require.NoError(t, err)
	assert.InDelta(t, 3.0, ratio, 1e-9)

	_, err = MedianRatio(ms(1), ms(0))
	assert.ErrorIs(t, err, ErrNoRounds)
	_, err = MedianRatio(nil, nil)
	assert.ErrorIs(t, err, ErrNoRounds)
	_, err = MedianRatio(ms(1, 2), ms(1))
	assert.Error(t, err)
}

// fakeClock advances only when an operation says so.
type fakeClock struct{ now time.Duration }

func (c *fakeClock) read() time.Duration { return c.now }

func TestRunRoundsAlternates(t *testing.T) {
	var clock fakeClock
	var order []string
	measured := func() { clock.now += 3; order = append(order, "m") }
	baseline := func() { clock.now += 1; order = append(order, "b") }

	rounds := runRounds(1050, 200, measured, baseline, clock.read)
	require.Len(t, rounds, 6)
	for i, r := range rounds {
		wantOps := 200
		if i == 5 {
			wantOps = 50 // the last round takes what is left
		}
		assert.Equal(t, wantOps, r.ops, "round %d", i)
		assert.Equal(t, time.Duration(3*wantOps), r.measured, "round %d", i)
		assert.Equal(t, time.Duration(wantOps), r.baseline, "round %d", i)
	}
	// Each side ran exactly total times; the first op of each round
	// alternates: measured, baseline, measured...
	assert.Len(t, order, 2*1050)
	first := 0
	for i, r := range rounds {
		want := map[bool]string{true: "m", false: "b"}[i%2 == 0]
		assert.Equal(t, want, order[first], "round %d starts with", i)
		first += 2 * r.ops
	}

	metrics := summarize("walk", "callers", rounds)
	assert.Equal(t, map[string]float64{"x-walk": 3, "walk-ns/op": 3, "callers-ns/op": 1}, metrics)
}

func TestSummarizeWithoutRounds(t *testing.T) {
	assert.Empty(t, summarize("walk", "callers", nil))
	assert.Empty(t, summarize("walk", "callers", []round{{ops: 1}}))
}

func TestOptions(t *testing.T) {
	nop := func() {}
	for _, tc := range []struct {
		name string
		opts []Option
		want string // "" when valid
	}{
		{"walk", nil, ""},
		{"walk", []Option{RoundOps(1), RoundOps(MaxRoundOps), BaselineName("callers")}, ""},
		{"walk", []Option{RoundOps(0)}, "RoundOps(0): want 1..1000000"},
		{"walk", []Option{RoundOps(MaxRoundOps + 1)}, "RoundOps(1000001)"},
		{"walk", []Option{nil}, "nil option"},
		{"walk", []Option{BaselineName("")}, `BaselineName("")`},
		{"walk", []Option{BaselineName("two words")}, `BaselineName("two words")`},
		{"walk", []Option{BaselineName("walk")}, "the measured function has that name"},
	} {
		cfg, err := newConfig(tc.name, nop, nop, tc.opts)
		if tc.want == "" {
			assert.NoError(t, err)
			continue
		}
		assert.ErrorIs(t, err, ErrInvalidOption)
		assert.ErrorContains(t, err, tc.want)
		_ = cfg
	}
	_, err := newConfig("two words", nop, nop, nil)
	assert.ErrorContains(t, err, "white space")
	_, err = newConfig("walk", nil, nop, nil)
	assert.ErrorContains(t, err, "nil function")
}

// TestRunReports runs Run as a benchmark, for a fixed number of
// operations, and checks what it reports; it asserts no speed.
func TestRunReports(t *testing.T) {
	benchtime := flag.Lookup("test.benchtime")
	require.NotNil(t, benchtime)
	old := benchtime.Value.String()
	require.NoError(t, benchtime.Value.Set("1000x"))
	defer func() { _ = benchtime.Value.Set(old) }()

	sink := 0
	result := testing.Benchmark(func(b *testing.B) {
		Run(b, "two", func() { sink += 2 }, func() { sink++ }, BaselineName("one"))
	})
	assert.Equal(t, 1000, result.N)
	for _, unit := range []string{"x-two", "two-ns/op", "one-ns/op", "two-allocs/op", "one-allocs/op"} {
		assert.Contains(t, result.Extra, unit)
	}
	assert.Zero(t, result.Extra["two-allocs/op"])
	assert.Positive(t, result.Extra["x-two"])
	// 1000 operations on each side, plus the allocation counts' runs.
	assert.GreaterOrEqual(t, sink, 3*1000)
}
