package main

import (
	"context"
	"fmt"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

// decode keeps a View of a tensor after freeing the tensor: the View is an
// owner of its own, so the memory stays, and the report names the line
// that made the View.
func decode() error {
	tr, err := track.New(track.Name("decode"), track.ReclaimLeaks(false))
	if err != nil {
		return err
	}
	dev, err := tensor.NewHostDevice(1 << 20)
	if err != nil {
		return err
	}
	alloc, err := tensor.NewDeviceAllocator(dev, tr)
	if err != nil {
		return err
	}
	x, err := tensor.Make(context.Background(), alloc, tensor.Spec{DType: tensor.Float32, Shape: tensor.Shape{16}})
	if err != nil {
		return err
	}
	head, err := x.View(0, 16) // kept past x's Free
	if err != nil {
		return err
	}
	if err := x.Free(); err != nil {
		return err
	}
	fmt.Println(tracktest.Find(tr, tracktest.MaxRetries(0)))
	return head.Free()
}
