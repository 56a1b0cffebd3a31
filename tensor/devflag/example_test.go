package devflag_test

import (
	"flag"
	"fmt"
	"io"

	"github.com/tensorlife/tensorlife/tensor/devflag"
)

func ExampleVar() {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var list devflag.List
	devflag.Var(fs, &list)
	fmt.Println(list, list.Names())
	_ = fs.Parse([]string{"-device", "cuda:1"})
	fmt.Println(list, list[0].CUDA, list[0].Ordinal)
	_ = fs.Parse([]string{"-device", "host,host"})
	fmt.Println(list, list.Names())
	fmt.Println(fs.Parse([]string{"-device", "gpu1"}))
	// Output:
	// host [host]
	// cuda:1 true 1
	// host,host [host:0 host:1]
	// invalid value "gpu1" for flag -device: devflag: invalid device "gpu1": want host or cuda:N
}
