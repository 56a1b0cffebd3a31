package retainhook_test

import (
	"fmt"

	"github.com/tensorlife/tensorlife/internal/retainhook"
)

// A device call is bracketed so that a heap dump can hold it off.
func ExampleEnterDevice() {
	held := retainhook.EnterDevice()
	defer retainhook.ExitDevice(held)
	fmt.Println("the driver is called here")
	// Output: the driver is called here
}
