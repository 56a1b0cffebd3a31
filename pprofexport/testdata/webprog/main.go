// Command webprog writes a profile of its live tensors to the file its
// first argument names: three masks made at one line of allocTwice, one at
// another. The web UI tests build it in several ways and serve the profile
// beside the binary, where pprof finds it and disassembles it.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/tensorlife/tensorlife/pprofexport"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

func main() {
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "webprog:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	tr, err := track.New(track.Name("webprog"))
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
	live, err := allocTwice(alloc)
	if err != nil {
		return err
	}
	snap, err := tr.SnapshotOf(track.Filter{})
	if err != nil {
		return err
	}
	if err := pprofexport.WriteFile(path, snap); err != nil {
		return err
	}
	for _, t := range live {
		if err := t.Free(); err != nil {
			return err
		}
	}
	return nil
}

//go:noinline
func allocTwice(alloc tensor.Allocator) ([]*tensor.Tensor, error) {
	var live []*tensor.Tensor
	for range 3 {
		m, err := tensor.New(context.Background(), alloc, tensor.Bool, 64, 64) // three masks
		if err != nil {
			return live, err
		}
		live = append(live, m)
	}
	m, err := tensor.New(context.Background(), alloc, tensor.Bool, 64, 64) // one mask
	if err != nil {
		return live, err
	}
	return append(live, m), nil
}
