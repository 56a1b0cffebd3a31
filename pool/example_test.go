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
	tracker, _ := track.New(track.WithName("example")) // track.Default() if not given
	p, err := pool.New(dev, pool.BudgetFraction(0.5), pool.MaxCachedBytes(8<<20), pool.WithTracker(tracker))
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
	fmt.Printf("reserved %s, active %s, cached %s\n",
		tensor.FormatBytes(s.Reserved), tensor.FormatBytes(s.Active), tensor.FormatBytes(s.Cached))
	fmt.Printf("device allocations %d, cache hits %d\n", s.DeviceAllocs, s.Hits)

	// The budget is 32 MiB: a bigger request never reaches the device.
	_, err = tensor.New(ctx, p, tensor.Float32, 10<<20)
	var oom *tensor.OOMError
	if errors.As(err, &oom) {
		fmt.Printf("out of memory: %s of %s %s\n", tensor.FormatBytes(oom.Requested), oom.Reason, tensor.FormatBytes(oom.Limit))
	}
	fmt.Println("close:", p.Close())
	// Output:
	// reserved 62.5 KiB, active 0 B, cached 62.5 KiB
	// device allocations 1, cache hits 2
	// out of memory: 40 MiB of budget 32 MiB
	// close: <nil>
}
