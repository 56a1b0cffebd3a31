package tensor_test

import (
	"context"
	"fmt"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

func Example() {
	dev, _ := tensor.NewHostDevice(64 << 20) // behaves like a 64 MiB GPU
	tr, _ := track.New()
	alloc, _ := tensor.NewDeviceAllocator(dev, tr)

	ctx := track.WithLabels(context.Background(), "request", "r-42")
	mask, err := tensor.FromSlice(ctx, alloc, []bool{true, true, false}, 1, 3)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(mask.DType(), mask.Shape(), mask.Bytes(), "bytes")
	fmt.Println("live tensors:", tr.Totals().LiveCount)

	if err := mask.Free(); err != nil {
		fmt.Println(err)
	}
	fmt.Println("live tensors:", tr.Totals().LiveCount)
	fmt.Println("used after free:", mask.CopyFromHost([]byte{1, 1, 1}))
	// Output:
	// bool [1 3] 3 bytes
	// live tensors: 1
	// live tensors: 0
	// used after free: tensor: use of freed tensor
}
