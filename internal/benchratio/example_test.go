package benchratio_test

import (
	"fmt"
	"time"

	"github.com/tensorlife/tensorlife/internal/benchratio"
)

// MedianRatio is the statistic Run reports, for rounds timed elsewhere:
// one slow round (a GC pause, a neighbour) does not move it.
func ExampleMedianRatio() {
	measured := []time.Duration{300, 310, 5000, 290, 300}
	baseline := []time.Duration{100, 100, 100, 100, 100}
	ratio, err := benchratio.MedianRatio(measured, baseline)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%.2fx\n", ratio)
	// Output:
	// 3.00x
}
