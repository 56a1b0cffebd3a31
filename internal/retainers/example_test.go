package retainers_test

import (
	"fmt"

	"github.com/tensorlife/tensorlife/internal/retainers"
)

func ExamplePath_String() {
	p := retainers.Path{
		Kind: retainers.PackageVar,
		Root: "package var main.maskCache",
		Expr: `["prompt-17"]`,
		Type: "map[string]*tensor.Tensor",
		Hops: 2,
	}
	fmt.Println(p)
	// Output: package var main.maskCache["prompt-17"]   (map[string]*tensor.Tensor)
}
