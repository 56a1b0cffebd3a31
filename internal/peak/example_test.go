package peak_test

import (
	"fmt"
	"sync/atomic"

	"github.com/tensorlife/tensorlife/internal/peak"
)

// A peak only ever rises: a lower value leaves it where it was.
func ExampleRaise() {
	var high atomic.Int64
	for _, v := range []int64{3, 7, 5} {
		peak.Raise(&high, v)
	}
	fmt.Println(high.Load())
	// Output: 7
}
