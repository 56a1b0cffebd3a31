package histogram_test

import (
	"fmt"

	"github.com/tensorlife/tensorlife/internal/histogram"
)

func Example() {
	var h histogram.Histogram
	for _, v := range []int64{100, 100, 100, 130, 5000} {
		h.Add(v)
	}
	fmt.Println(h.Quantile(0.5), h.Quantile(0.99), h.Max())
	for _, b := range h.Buckets() {
		fmt.Printf("[%d, %d): %d, max %d\n", b.Low, b.High, b.Count, b.Max)
	}
	// Output:
	// 100 5000 5000
	// [96, 104): 3, max 100
	// [128, 144): 1, max 130
	// [4608, 5120): 1, max 5000
}
