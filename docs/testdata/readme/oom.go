package main

import (
	"context"
	"fmt"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// outOfMemory runs a pool out of its budget on a device where another
// tensorlife allocator and memory tensorlife does not hold take their
// share, and prints the error.
func outOfMemory() error {
	tr, err := track.New(track.Name("oom"))
	if err != nil {
		return err
	}
	dev, err := tensor.NewHostDevice(1<<20, tensor.DeviceName("host:0"))
	if err != nil {
		return err
	}
	outside, err := dev.Alloc(300 << 10) // a C library's buffers, say
	if err != nil {
		return err
	}
	defer dev.Free(outside, 300<<10)
	other, err := tensor.NewDeviceAllocator(dev, tr)
	if err != nil {
		return err
	}
	ctx := context.Background()
	weights, err := tensor.Make(ctx, other, tensor.Spec{DType: tensor.Uint8, Shape: tensor.Shape{224 << 10}, Kind: "weights"})
	if err != nil {
		return err
	}
	defer weights.Free()
	p, err := pool.New(dev, pool.Tracker(tr), pool.Budget(64<<10))
	if err != nil {
		return err
	}
	defer p.Close()
	kv, err := tensor.Make(ctx, p, tensor.Spec{DType: tensor.Float16, Shape: tensor.Shape{8 << 10}, Kind: "kv-cache"})
	if err != nil {
		return err
	}
	defer kv.Free()
	_, err = tensor.Make(ctx, p, tensor.Spec{DType: tensor.Float32, Shape: tensor.Shape{14 << 10}, Kind: "activations"})
	fmt.Println(err)
	return nil
}
