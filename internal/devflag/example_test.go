package devflag_test

import (
	"flag"
	"fmt"
	"io"

	"github.com/tensorlife/tensorlife/internal/devflag"
)

func ExampleVar() {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var spec devflag.Spec
	devflag.Var(fs, &spec)
	fmt.Println(spec)
	_ = fs.Parse([]string{"-device", "cuda:1"})
	fmt.Println(spec, spec.CUDA, spec.Ordinal)
	fmt.Println(fs.Parse([]string{"-device", "gpu1"}))
	// Output:
	// host
	// cuda:1 true 1
	// invalid value "gpu1" for flag -device: devflag: invalid device "gpu1": want host or cuda:N
}
