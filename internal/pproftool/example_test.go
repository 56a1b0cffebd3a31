package pproftool_test

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/tensorlife/tensorlife/internal/pproftool"
)

func Example() {
	bin, err := pproftool.Path()
	if err != nil {
		fmt.Println("no go tool pprof:", err)
		return
	}
	fmt.Println(strings.TrimSuffix(filepath.Base(bin), ".exe"))
	// Output: pprof
}
