package mask_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/tensorlife/tensorlife/mask"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// A request's mask is built once and grown one token per decode step.
func Example() {
	dev, _ := tensor.NewHostDevice(64 << 20)
	tr, _ := track.New()
	alloc, _ := tensor.NewDeviceAllocator(dev, tr) // a *pool.Pool in a service
	b, err := mask.NewBuilder(alloc)
	if err != nil {
		fmt.Println(err)
		return
	}

	ctx := track.WithLabels(context.Background(), "request", "r-1")
	m, err := b.NewGrowable(ctx, 2, 4) // two sequences, room for 4 tokens
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = m.Append(3)                        // the prompt
	_ = m.AppendValid([]bool{true, false}) // sequence 1 has finished
	for range 4 {
		_ = m.Append(1) // decode steps: grows once, from 4 to 8 tokens
	}
	view, _ := m.View()
	valid, _ := tensor.ToSlice[bool](view)
	fmt.Println("view:", view.Shape(), "capacity:", m.Cap())
	fmt.Println("token 3:", valid[6:8])

	_ = view.Free()
	_ = m.Free()
	fmt.Println("live tensors:", tr.Totals().LiveCount)
	// Output:
	// view: [8 2] capacity: 8
	// token 3: [true false]
	// live tensors: 0
}

// Requests that share a prompt share its mask through a Cache; each gets a
// handle of its own.
func ExampleCache_GetOrBuild() {
	dev, _ := tensor.NewHostDevice(64 << 20)
	alloc, _ := tensor.NewDeviceAllocator(dev, nil)
	b, _ := mask.NewBuilder(alloc, mask.DType(tensor.Float32))
	cache, err := mask.NewCache(mask.MaxBytes(1<<20), mask.MaxEntries(64))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cache.Close()

	for _, req := range []string{"r-1", "r-2", "r-3"} {
		ctx := track.WithLabels(context.Background(), "request", req)
		m, err := cache.GetOrBuild(ctx, "system-prompt/128", func(ctx context.Context) (*tensor.Tensor, error) {
			return b.Causal(ctx, 128)
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		// ... attention over m ...
		_ = m.Free()
	}
	s := cache.Stats()
	// The budget counts the mask (128×128 float32), its key and the entry.
	fmt.Printf("hits %d, misses %d, %d entry of %d bytes\n", s.Hits, s.Misses, s.Entries, s.Bytes)
	// Output: hits 2, misses 1, 1 entry of 65873 bytes
}

// Strict turns the leaking pattern, a new mask at every step, into an
// error that names the line.
func ExampleStrict() {
	dev, _ := tensor.NewHostDevice(64 << 20)
	tr, _ := track.New()
	alloc, _ := tensor.NewDeviceAllocator(dev, tr)
	b, _ := mask.NewBuilder(alloc, mask.Strict(true))

	ctx := track.WithLabels(context.Background(), "request", "r-1")
	var masks []*tensor.Tensor
	for pos := 1; pos <= 3; pos++ {
		m, err := b.Padding(ctx, []int{pos}, pos) // rebuilt every step
		var re *mask.RebuildError
		if errors.As(err, &re) {
			fmt.Printf("step %d refused: mask %d from %s for %v\n", pos, re.Count, re.Location.Function, re.Labels)
			continue
		}
		masks = append(masks, m)
	}
	fmt.Println("rebuilds:", tr.Totals().Event(track.EventMaskRebuilt), "masks kept:", len(masks))
	for _, m := range masks {
		_ = m.Free()
	}
	// Output:
	// step 2 refused: mask 2 from github.com/tensorlife/tensorlife/mask_test.ExampleStrict for {request=r-1}
	// step 3 refused: mask 3 from github.com/tensorlife/tensorlife/mask_test.ExampleStrict for {request=r-1}
	// rebuilds: 2 masks kept: 1
}

// A Builder and a Cache take options of their own types, so a list of
// options kept in a service's configuration is checked by the compiler: a
// cache's MaxBytes in the builder's list does not compile. Values are
// checked by the constructor.
func ExampleBuilderOption() {
	dev, _ := tensor.NewHostDevice(64 << 20)
	alloc, _ := tensor.NewDeviceAllocator(dev, nil)

	builderOpts := []mask.BuilderOption{mask.DType(tensor.Float32), mask.MaxLength(4096)}
	cacheOpts := []mask.CacheOption{mask.CacheName("prompts"), mask.MaxBytes(1 << 20)}
	b, err := mask.NewBuilder(alloc, builderOpts...)
	if err != nil {
		fmt.Println(err)
		return
	}
	cache, err := mask.NewCache(cacheOpts...)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cache.Close()
	fmt.Println(b.DType(), cache.Stats().Name, cache.Stats().MaxBytes)

	_, err = mask.NewCache(mask.MaxEntries(-1))
	fmt.Println(err)
	// Output:
	// float32 prompts 1048576
	// mask: invalid option: MaxEntries(-1): want at least 0
}
