package retainers

import (
	"testing"
	"time"
)

// benchHeap is a test-sized heap: 200,000 small objects in maps and
// slices, about 20 MB.
var benchHeap map[int][]*item

// BenchmarkFind measures a whole search on a test-sized heap and reports
// the world's pause (the dump) and the total, both in milliseconds, and the
// dump's size. Run it with -ldflags='-s=false -w=false' to include the
// reading of the symbols and the DWARF, which a stripped binary skips.
func BenchmarkFind(b *testing.B) {
	if benchHeap == nil {
		benchHeap = make(map[int][]*item, 20_000)
		for i := range 20_000 {
			s := make([]*item, 10)
			for j := range s {
				s[j] = &item{i, j}
			}
			benchHeap[i] = s
		}
	}
	scenariosOnce.Do(buildScenarios)
	var pause, total time.Duration
	var bytes int64
	for b.Loop() {
		res, err := findScenarios(Config{})
		if err != nil {
			b.Fatal(err)
		}
		pause += res.Pause
		total += res.Total
		bytes = res.DumpBytes
	}
	b.ReportMetric(float64(pause.Microseconds())/1e3/float64(b.N), "pause-ms/op")
	b.ReportMetric(float64(total.Microseconds())/1e3/float64(b.N), "total-ms/op")
	b.ReportMetric(float64(bytes)/(1<<20), "dump-MiB")
}
