package main

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/tensorlife/tensorlife/mask"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// workload is what the agent serves.
type workload struct {
	requests int    // requests to serve
	tokens   int    // tokens generated per request
	batch    int    // sequences decoded together per request
	fixed    bool   // the fix: one growable mask per request
	seed     uint64 // prompt choice
}

// agent is a toy decode loop with the memory behaviour of a real one: each
// request holds a KV cache for its lifetime, each step makes a logits tensor
// and needs an attention mask for the sequence so far. Requests go to the
// lanes round-robin, as a data-parallel service spreads them over GPUs.
type agent struct {
	w     workload
	lanes []lane
	rng   *rand.Rand
	// maskCache is the seed's bug: a global cache keyed by request and step
	// that keeps every mask ever built and never evicts.
	maskCache map[string]*tensor.Tensor
}

// promptLengths are the agent's system prompts: requests repeat them, so
// their masks are worth sharing.
var promptLengths = []int{48, 64, 96, 128, 64, 48}

func newAgent(w workload, lanes []lane) *agent {
	return &agent{w: w, lanes: lanes, rng: rand.New(rand.NewPCG(w.seed, 1)), maskCache: map[string]*tensor.Tensor{}}
}

// serve runs one request on lane id mod the lanes: prefill, then w.tokens
// decode steps. The batch loop's context does not end with a request, so
// the request is scoped explicitly: what serve leaves live when it returns
// has outlived its request, which is what the watcher judges.
func (a *agent) serve(ctx context.Context, id int) error {
	ctx, end := track.WithRequest(ctx)
	defer end()
	promptLen := promptLengths[a.rng.IntN(len(promptLengths))]
	ctx = track.WithLabels(ctx, "request", fmt.Sprintf("r%d", id), "prompt", fmt.Sprint(promptLen)) // prompt: its kind
	maxLen := promptLen + a.w.tokens
	l := a.lanes[id%len(a.lanes)]

	kv, err := tensor.Make(ctx, l.alloc, tensor.Spec{DType: tensor.Float16, Shape: tensor.Shape{a.w.batch, maxLen, 64}, Kind: "kv-cache"})
	if err != nil {
		return err
	}
	defer kv.Free()

	if a.w.fixed {
		return a.decodeFixed(ctx, l, promptLen, maxLen)
	}
	return a.decodeLeaky(ctx, l, id, promptLen, maxLen)
}

// decodeLeaky is the seed's loop: the valid positions live in a Go slice
// that grows by one token per step, and every step turns the whole slice
// into a new mask tensor, kept forever in the global cache.
func (a *agent) decodeLeaky(ctx context.Context, l lane, id, promptLen, maxLen int) error {
	lengths := make([]int, a.w.batch)
	for pos := promptLen; pos < maxLen; pos++ {
		for i := range lengths {
			lengths[i] = pos + 1
		}
		m, err := l.masks.Padding(ctx, lengths, pos+1) // the leaking line: a new mask every step
		if err != nil {
			return fmt.Errorf("step %d: %w", pos-promptLen, err)
		}
		a.maskCache[fmt.Sprintf("r%d/%d", id, pos)] = m
		if err := a.logits(ctx, l); err != nil {
			return err
		}
	}
	return nil
}

// decodeFixed builds the request's mask once, grows it by one token per
// step (a few bytes copied, nothing allocated), and shares prompt masks
// between requests through the bounded cache.
func (a *agent) decodeFixed(ctx context.Context, l lane, promptLen, maxLen int) error {
	prompt, err := l.prompts.GetOrBuild(ctx, fmt.Sprintf("prompt/%d", promptLen), func(ctx context.Context) (*tensor.Tensor, error) {
		return l.masks.Causal(ctx, promptLen)
	})
	if err != nil {
		return err
	}
	// Prefill would run attention over prompt here.
	if err := prompt.Free(); err != nil {
		return err
	}

	m, err := l.masks.NewGrowable(ctx, a.w.batch, maxLen)
	if err != nil {
		return err
	}
	defer m.Free()
	if err := m.Append(promptLen); err != nil {
		return err
	}
	for pos := promptLen; pos < maxLen; pos++ {
		if err := m.Append(1); err != nil {
			return fmt.Errorf("step %d: %w", pos-promptLen, err)
		}
		if err := a.logits(ctx, l); err != nil {
			return err
		}
	}
	return nil
}

// logits stands for the step's model output: made and freed every step.
func (a *agent) logits(ctx context.Context, l lane) error {
	t, err := tensor.Make(ctx, l.alloc, tensor.Spec{DType: tensor.Float32, Shape: tensor.Shape{a.w.batch, 512}, Kind: "logits"})
	if err != nil {
		return err
	}
	return t.Free()
}

// close frees what the global map holds, as a shutdown would.
func (a *agent) close() error {
	var first error
	for k, m := range a.maskCache {
		if err := m.Free(); err != nil && first == nil {
			first = err
		}
		delete(a.maskCache, k)
	}
	return first
}

// lane is one device's share of the work: its pool, the mask builder over
// it, and the fix's bounded cache of prompt masks on it (a mask is only of
// use on the device that holds it).
type lane struct {
	alloc   tensor.Allocator
	masks   *mask.Builder
	prompts *mask.Cache
}
