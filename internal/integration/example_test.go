package integration_test

import (
	"context"
	"fmt"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// A pool over a host device records its tensors in its tracker and counts
// what it reserves from the device.
func Example() {
	tr, _ := track.New()
	dev, _ := tensor.NewHostDevice(1 << 20)
	p, _ := pool.New(dev, pool.Tracker(tr))
	x, _ := tensor.New(context.Background(), p, tensor.Float32, 256)
	fmt.Println(tr.Totals().LiveBytes, tr.ReservedOn(dev.Name()) >= 1024)
	_ = x.Free()
	fmt.Println(tr.Totals().LiveBytes)
	// Output:
	// 1024 true
	// 0
}
