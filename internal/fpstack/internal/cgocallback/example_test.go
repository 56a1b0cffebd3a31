package cgocallback_test

import (
	"fmt"

	"github.com/tensorlife/tensorlife/internal/fpstack/internal/cgocallback"
)

// Call runs f, through C where cgo is enabled.
func Example() {
	ran := false
	cgocallback.Call(func() { ran = true })
	fmt.Println(ran)
	// Output: true
}
