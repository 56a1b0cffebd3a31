package hotpath_test

import (
	"fmt"

	"github.com/tensorlife/tensorlife/internal/hotpath"
)

// A device call is bracketed so that a heap dump can hold it off.
func ExampleEnterDevice() {
	held := hotpath.EnterDevice()
	defer hotpath.ExitDevice(held)
	fmt.Println("the driver is called here")
	// Output: the driver is called here
}
