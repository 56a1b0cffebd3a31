package benchratio_test

import (
	"strconv"
	"testing"

	"github.com/tensorlife/tensorlife/internal/benchratio"
)

// Run goes inside a benchmark function: this one measures formatting a
// 13-digit number against a 1-digit one. `go test -bench Format` prints,
// besides ns/op and allocs/op of the pair, x-long (the median per-round
// ratio), long-ns/op, short-ns/op, long-allocs/op and short-allocs/op:
//
//	BenchmarkFormat-2  200000  82.70 ns/op  1.000 long-allocs/op  59.34 long-ns/op
//	    0 short-allocs/op  6.610 short-ns/op  9.082 x-long  16 B/op  1 allocs/op
func ExampleRun() {
	benchmarkFormat := func(b *testing.B) {
		var sink string
		benchratio.Run(b, "long",
			func() { sink = strconv.Itoa(1234567890123) },
			func() { sink = strconv.Itoa(7) },
			benchratio.BaselineName("short"))
		_ = sink
	}
	_ = benchmarkFormat // named BenchmarkFormat in a *_bench_test.go file
}
