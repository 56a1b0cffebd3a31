package cuda_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/cuda"
)

// Use the first GPU where there is one, and fall back to the host device
// where there is none or the binary was built without CUDA.
func ExampleOpen() {
	var dev tensor.Device
	gpu, err := cuda.Open(0, cuda.WithMemoryLimit(1<<30))
	switch {
	case err == nil:
		defer gpu.Close()
		dev = gpu
	case errors.Is(err, tensor.ErrNoDevice):
		host, err := tensor.NewHostDevice(1 << 30)
		if err != nil {
			log.Fatal(err)
		}
		dev = host
	default:
		log.Fatal(err)
	}

	p, err := dev.Alloc(5)
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Free(p, 5)
	if err := dev.CopyToDevice(p, []byte("hello")); err != nil {
		log.Fatal(err)
	}
	out := make([]byte, 5)
	if err := dev.CopyToHost(out, p); err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(out))

	_, err = dev.Alloc(2 << 30)
	fmt.Println(errors.Is(err, tensor.ErrOutOfMemory))
	// Output:
	// hello
	// true
}
