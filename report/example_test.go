package report_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/report"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// A service writes the summary of its tracker: the pool made with it, and
// the pool's device, are in it with nothing else passed.
func ExampleWriteSummary() {
	tr, _ := track.New(track.Name("example"))
	dev, _ := tensor.NewHostDevice(1 << 20)
	p, _ := pool.New(dev, pool.Tracker(tr))
	x, _ := tensor.New(context.Background(), p, tensor.Float32, 1024)
	defer x.Free()

	var b strings.Builder
	if err := report.WriteSummary(&b, tr); err != nil {
		panic(err)
	}
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(line, "  live bytes") || strings.HasPrefix(line, "Pools") ||
			strings.HasPrefix(line, "Devices") || strings.HasPrefix(line, "Top sites") {
			fmt.Println(strings.Join(strings.Fields(line), " "))
		}
	}
	// Output:
	// live bytes 4 KiB
	// Pools
	// Devices (outside tensorlife: used on the device, not reserved by tensorlife)
	// Top sites by live bytes (1 of 1 sites with live tensors)
}
