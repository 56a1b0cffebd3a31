package tensortest_test

import (
	"errors"
	"fmt"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/tensortest"
)

func Example() {
	host, _ := tensor.NewHostDevice(1 << 20)
	dev, _ := tensortest.NewFaulty(host, tensortest.FailNth(2))

	a, _ := dev.Alloc(4096)
	_, err := dev.Alloc(4096)
	fmt.Println("second alloc injected:", errors.Is(err, tensortest.ErrInjected), errors.Is(err, tensor.ErrOutOfMemory))

	_ = dev.Free(a, 4096)
	err = dev.Free(a, 4096)
	fmt.Println("double free caught:", errors.Is(err, tensor.ErrInvalidPointer), dev.DoubleFrees())

	blocks, bytes := dev.Outstanding()
	fmt.Println("outstanding:", bytes, "bytes in", blocks, "blocks")
	// Output:
	// second alloc injected: true true
	// double free caught: true 1
	// outstanding: 0 bytes in 0 blocks
}
