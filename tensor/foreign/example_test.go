package foreign_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/foreign"
	"github.com/tensorlife/tensorlife/track"
)

// A library hands back a buffer it allocated; adopting it makes it a
// tensor that tensorlife tracks, and gives it back through the library
// when the last owner frees.
func Example() {
	dev, _ := tensor.NewHostDevice(1 << 20)
	tr, _ := track.New()
	ctx := context.Background()

	// What a C library would do: allocate, and keep the right to free.
	p, _ := dev.Alloc(1024)
	release := func(p tensor.DevicePtr) error {
		fmt.Println("library frees its buffer")
		return dev.Free(p, 1024)
	}

	out, err := foreign.Adopt(ctx, tr, foreign.Memory{Device: dev, Ptr: p, Bytes: 1024, Release: release},
		tensor.Spec{DType: tensor.Float32, Shape: tensor.Shape{256}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out.Kind(), out.DType(), out.Shape())
	fmt.Println("tensorlife holds", tr.ReservedOn("host"), "bytes")

	// The same memory cannot be adopted twice.
	_, err = foreign.Adopt(ctx, tr, foreign.Memory{Device: dev, Ptr: p, Bytes: 1024, Release: release},
		tensor.Spec{DType: tensor.Uint8, Shape: tensor.Shape{1024}})
	fmt.Println("adopted again:", errors.Is(err, foreign.ErrAlreadyAdopted))

	if err := out.Free(); err != nil {
		fmt.Println(err)
	}
	st := foreign.Adoptions(tr)[0]
	fmt.Println("adoptions:", st.Allocs, "released:", st.Frees, "held:", st.Reserved)
	// Output:
	// adopted float32 [256]
	// tensorlife holds 1024 bytes
	// adopted again: true
	// library frees its buffer
	// adoptions: 1 released: 1 held: 0
}
