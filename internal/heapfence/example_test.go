package heapfence_test

import (
	"fmt"

	"github.com/tensorlife/tensorlife/internal/heapfence"
)

// A device call is bracketed so that a heap dump can hold it off.
func ExampleEnterDevice() {
	held := heapfence.EnterDevice()
	defer heapfence.ExitDevice(held)
	fmt.Println("the driver is called here")
	// Output: the driver is called here
}
