package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/report"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// prefill holds a prompt's KV cache: 1 MiB a block of tokens.
//
//go:noinline
func prefill(ctx context.Context, p *pool.Pool, blocks int) ([]*tensor.Tensor, error) {
	var kv []*tensor.Tensor
	for range blocks {
		x, err := tensor.Make(ctx, p, tensor.Spec{DType: tensor.Float16, Shape: tensor.Shape{512 << 10}, Kind: "kv-cache"})
		if err != nil {
			return kv, err
		}
		kv = append(kv, x)
	}
	return kv, nil
}

// openRequests runs a budget out with three long prompts in flight beside
// a hundred short requests, nothing leaked, and prints the error and the
// summary: the requests that hold the memory, and what each route's
// requests cost at their peak.
func openRequests() error {
	// The tracker's clock moves when told, so that the ages print alike
	// every run: the short requests came a minute before the prompts.
	now := time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)
	tr, err := track.New(track.Name("requests"), track.RequestKinds("route"), track.Clock(func() time.Time { return now }))
	if err != nil {
		return err
	}
	dev, err := tensor.NewHostDevice(64 << 20)
	if err != nil {
		return err
	}
	p, err := pool.New(dev, pool.Tracker(tr), pool.Budget(16<<20))
	if err != nil {
		return err
	}
	defer p.Close()
	var held []*tensor.Tensor
	defer func() {
		for _, x := range held {
			x.Free()
		}
	}()
	begin := func(kv ...string) (context.Context, context.CancelFunc) {
		ctx, end := track.WithRequest(context.Background())
		return track.WithLabels(ctx, kv...), end
	}
	for i := range 20 { // requests that ended: what a prompt costs
		ctx, end := begin("route", "POST /generate")
		kv, err := prefill(ctx, p, 1+i%4)
		for _, x := range kv {
			x.Free()
		}
		end()
		if err != nil {
			return err
		}
	}
	for i := range 100 {
		now = now.Add(time.Millisecond)
		ctx, end := begin("route", "POST /embed", "request", fmt.Sprint("e", i))
		defer end()
		x, err := tensor.Make(ctx, p, tensor.Spec{DType: tensor.Float32, Shape: tensor.Shape{1024}, Kind: "activations"})
		if err != nil {
			return err
		}
		held = append(held, x)
	}
	now = now.Add(time.Minute)
	for i, blocks := range []int{7, 4, 4} {
		now = now.Add(10 * time.Second)
		ctx, end := begin("route", "POST /generate", "request", fmt.Sprint("g", i))
		defer end()
		kv, err := prefill(ctx, p, blocks)
		held = append(held, kv...)
		if err != nil {
			return err
		}
	}
	now = now.Add(20 * time.Second)
	ctx, end := begin("route", "POST /generate", "request", "g3")
	defer end()
	kv, err := prefill(ctx, p, 4) // refused at its first block
	held = append(held, kv...)
	fmt.Println(err)
	fmt.Println()
	return report.WriteSummary(os.Stdout, tr)
}
