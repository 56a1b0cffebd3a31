package pool_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

func Example() {
	dev, _ := tensor.NewHostDevice(64 << 20)
	tracker, _ := track.New(track.Name("example")) // track.Default() if not given
	p, err := pool.New(dev, pool.BudgetFraction(0.5), pool.MaxCachedBytes(8<<20), pool.Tracker(tracker))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()

	// A decode loop: each step's 62.5 KiB scratch tensor (64000 bytes,
	// rounded to a multiple of 512) reuses the last one's block.
	for range 3 {
		scratch, err := tensor.New(ctx, p, tensor.Float32, 16, 1000)
		if err != nil {
			fmt.Println(err)
			return
		}
		_ = scratch.Free()
	}
	s := p.Stats()
	const kib = 1024.0
	fmt.Printf("reserved %.1f KiB, active %.1f KiB, cached %.1f KiB\n", float64(s.Reserved)/kib, float64(s.Active)/kib, float64(s.Cached)/kib)
	fmt.Printf("device allocations %d, cache hits %d\n", s.DeviceAllocs, s.Hits)

	// The budget is 32 MiB: a bigger request never reaches the device.
	_, err = tensor.New(ctx, p, tensor.Float32, 10<<20)
	var oom *tensor.OOMError
	if errors.As(err, &oom) {
		fmt.Printf("out of memory: %d MiB of %s %d MiB\n", oom.Requested>>20, oom.Reason, oom.Limit>>20)
	}
	fmt.Println("close:", p.Close())
	// Output:
	// reserved 62.5 KiB, active 0.0 KiB, cached 62.5 KiB
	// device allocations 1, cache hits 2
	// out of memory: 40 MiB of budget 32 MiB
	// close: <nil>
}
