package oomdump_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tensorlife/tensorlife/oomdump"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// A service whose cache never lets go runs its pool out of budget; the
// first out-of-memory error leaves a dump behind.
func Example() {
	dir, err := os.MkdirTemp("", "oomdump-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	tracker, _ := track.New(track.Name("service"), track.KeepHistory(1<<16))
	dev, _ := tensor.NewHostDevice(64 << 20)
	dumper, err := oomdump.New(tracker, filepath.Join(dir, "oom"))
	if err != nil {
		panic(err)
	}
	p, err := pool.New(dev, pool.Tracker(tracker), pool.Budget(1<<20), pool.OnOutOfMemory(dumper.OutOfMemory))
	if err != nil {
		panic(err)
	}

	var cache []*tensor.Tensor // the leak: kept forever
	for {
		t, err := tensor.New(context.Background(), p, tensor.Float32, 256, 256)
		if errors.Is(err, tensor.ErrOutOfMemory) {
			break
		}
		cache = append(cache, t)
	}
	if err := dumper.Close(); err != nil { // waits for the dump
		panic(err)
	}
	dump, _ := dumper.Last()
	for _, f := range dump.Files {
		name := filepath.Base(f)
		fmt.Println(name[:strings.Index(name, "-oom-")], name[strings.LastIndex(name, "-")+1:])
	}

	for _, t := range cache {
		_ = t.Free()
	}
	_ = p.Close()
	// Output:
	// service 1.pb.gz
	// service 1.summary.txt
	// service 1.trace.json
	// service 1.svg
}
