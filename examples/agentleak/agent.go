package main

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// config is one run of the agent loop.
type config struct {
	requests int  // requests to serve
	tokens   int  // tokens generated per request
	batch    int  // sequences per request
	fixed    bool // build the mask once per request instead of every step
	seed     uint64
}

// agent is a toy decode loop with the memory behaviour of a real one: each
// request holds a KV cache for its lifetime, each step makes a logits tensor
// and an attention mask for the sequence so far.
type agent struct {
	cfg   config
	alloc tensor.Allocator
	rng   *rand.Rand
	// maskCache is the seed's bug: an unbounded global cache that keeps every
	// mask ever built, keyed by request and step, and never evicts.
	maskCache map[string]*tensor.Tensor
}

func newAgent(cfg config, alloc tensor.Allocator) *agent {
	return &agent{cfg: cfg, alloc: alloc, rng: rand.New(rand.NewPCG(cfg.seed, 1)), maskCache: map[string]*tensor.Tensor{}}
}

// prompts are the agent's repeated system prompts: requests reuse them.
var promptLengths = []int{48, 64, 96, 64, 48, 128}

// serve runs one request: prefill, then tokens decode steps.
func (a *agent) serve(ctx context.Context, id int) error {
	ctx = track.WithLabels(ctx, "request", fmt.Sprintf("r%d", id))
	promptLen := promptLengths[a.rng.IntN(len(promptLengths))]
	maxLen := promptLen + a.cfg.tokens

	kv, err := tensor.Make(ctx, a.alloc, tensor.Spec{DType: tensor.Float16, Shape: tensor.Shape{a.cfg.batch, maxLen, 64}, Kind: "kv-cache"})
	if err != nil {
		return err
	}
	defer kv.Free()

	var step func(ctx context.Context, pos int) error
	if a.cfg.fixed {
		mask, err := a.newRequestMask(ctx, promptLen, maxLen)
		if err != nil {
			return err
		}
		defer mask.Free()
		step = func(ctx context.Context, pos int) error { return a.extendMask(mask, pos) }
	} else {
		// The seed's attention mask lives in a Go slice that grows by one
		// token per step...
		valid := make([]float32, 0, maxLen*a.cfg.batch)
		for range promptLen * a.cfg.batch {
			valid = append(valid, 0)
		}
		step = func(ctx context.Context, pos int) error {
			for range a.cfg.batch {
				valid = append(valid, 0)
			}
			return a.rebuildMask(ctx, id, pos, valid)
		}
	}

	for pos := promptLen; pos < maxLen; pos++ {
		if err := step(ctx, pos); err != nil {
			return fmt.Errorf("request %d step %d: %w", id, pos-promptLen, err)
		}
		logits, err := tensor.Make(ctx, a.alloc, tensor.Spec{DType: tensor.Float32, Shape: tensor.Shape{a.cfg.batch, 512}, Kind: "logits"})
		if err != nil {
			return err
		}
		if err := logits.Free(); err != nil {
			return err
		}
	}
	return nil
}

// rebuildMask is the leak: a new device tensor from the whole growing slice
// at every step, kept forever in the global cache.
func (a *agent) rebuildMask(ctx context.Context, id, pos int, valid []float32) error {
	mask, err := tensor.FromSlice(ctx, a.alloc, valid, a.cfg.batch, pos+1)
	if err != nil {
		return err
	}
	a.maskCache[fmt.Sprintf("r%d/%d", id, pos)] = mask
	return nil
}

// newRequestMask builds the request's mask once, at its full length, with
// only the prompt marked valid.
func (a *agent) newRequestMask(ctx context.Context, promptLen, maxLen int) (*tensor.Tensor, error) {
	mask, err := tensor.Make(ctx, a.alloc, tensor.Spec{DType: tensor.Float32, Shape: tensor.Shape{a.cfg.batch, maxLen}, Kind: "mask"})
	if err != nil {
		return nil, err
	}
	if err := mask.Fill(0); err != nil {
		return nil, joinFree(err, mask)
	}
	return mask, nil
}

// extendMask marks position pos valid: a few bytes copied, nothing allocated.
func (a *agent) extendMask(mask *tensor.Tensor, pos int) error {
	var zero [4]byte // additive mask: 0 keeps the position
	rowBytes := int64(mask.Dim(1)) * 4
	for b := range a.cfg.batch {
		if err := mask.CopyFromHostAt(int64(b)*rowBytes+int64(pos)*4, zero[:], false); err != nil {
			return err
		}
	}
	return nil
}

// close frees what the global cache holds, as a shutdown would.
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

func joinFree(err error, t *tensor.Tensor) error {
	if ferr := t.Free(); ferr != nil {
		return fmt.Errorf("%w (freeing: %w)", err, ferr)
	}
	return err
}
