package devicetest_test

import (
	"fmt"
	"strings"

	"github.com/tensorlife/tensorlife/internal/devicetest"
)

// A device's tests call devicetest.Run (see the package documentation);
// each check becomes a subtest of that name.
func ExampleChecks() {
	fmt.Println(strings.Join(devicetest.Checks(), "\n"))
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
