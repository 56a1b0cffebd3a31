package format_test

import (
	"fmt"
	"time"

	"github.com/tensorlife/tensorlife/internal/format"
)

func Example() {
	fmt.Println(format.Bytes(3<<20 + 512<<10))
	fmt.Println(format.Age(1234 * time.Millisecond))
	fmt.Println(format.Shape([]int{1, 128, 128}))
	// Output:
	// 3.5 MiB
	// 1.2s
	// [1 128 128]
}
