package invariants_test

import (
	"fmt"

	"github.com/tensorlife/tensorlife/internal/invariants"
)

func Example() {
	err := fmt.Errorf("double free")
	if invariants.Enabled {
		panic(err) // only in builds with -tags tensorlife_invariants
	}
	fmt.Println("reported:", err)
	// Output: reported: double free
}
