package tensortest_test

import (
	"fmt"
	"strings"

	"github.com/tensorlife/tensorlife/tensor/tensortest"
)

// A device's tests call tensortest.Run (see the package documentation);
// each check becomes a subtest of that name.
func ExampleChecks() {
	fmt.Println(strings.Join(tensortest.Checks(), "\n"))
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
