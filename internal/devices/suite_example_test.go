package devices_test

import (
	"fmt"
	"strings"

	"github.com/tensorlife/tensorlife/internal/devices"
)

// A device's tests call devices.Run (see the package documentation);
// each check becomes a subtest of that name.
func ExampleChecks() {
	fmt.Println(strings.Join(devices.Checks(), "\n"))
	// Output:
	// AllocFree
	// CopyRoundTrip
	// CopyWithOffsets
	// Memset
	// MemInfo
	// OutOfMemory
	// InvalidSize
	// InvalidPointer
	// CopyOutOfRange
	// Concurrent
}
