// Package mask builds attention masks the way that does not leak: once per
// request, grown in place as tokens are generated, drawn from a pool, and
// shared through a cache with a byte budget.
//
// The leak this package exists to prevent: an agent service turned its
// growing list of valid positions into a new GPU mask at every generation
// step and kept every mask in a global map that never evicted. With this
// package, the same code either uses the fixed pattern, which is the easy
// one, or is reported loudly.
//
// # Start here
//
//	b, err := mask.NewBuilder(pool, mask.DType(tensor.Float32))
//
//	// Per request: build the mask once...
//	ctx = track.WithLabels(ctx, "request", id)
//	m, err := b.NewGrowable(ctx, batch, promptLen+maxNewTokens)
//	defer m.Free()
//	err = m.Append(promptLen)
//	for step := range maxNewTokens {
//		err = m.Append(1) // ...and grow it: a few bytes copied, nothing allocated
//		view, err := m.View() // [m.Len(), batch], exactly the tokens so far
//		// run the kernel, then
//		view.Free()
//	}
//
// Masks shared by requests (the causal mask of a repeated prompt) live in
// a Cache:
//
//	cache, err := mask.NewCache(mask.MaxBytes(64<<20), mask.MaxEntries(256))
//	m, err := cache.GetOrBuild(ctx, key, func(ctx context.Context) (*tensor.Tensor, error) {
//		return b.CausalPadding(ctx, lengths, seqLen)
//	})
//	defer m.Free() // the caller's own handle; the cache keeps its own
//
// # Builders
//
// A Builder makes masks from real inputs, for a batch: Padding from
// sequence lengths, PaddingFromTokens from token ids and a pad id, Causal,
// and CausalPadding (both at once). The element type is set once per
// Builder (DType): tensor.Bool or tensor.Uint8 hold 1 to attend and 0
// to mask; tensor.Float32, tensor.Float16 and tensor.BFloat16 are additive
// masks holding 0 and MaskedBias, as attention kernels add them to scores.
// Every mask is a *tensor.Tensor of kind Kind that the caller owns and
// frees. Bad input (an empty batch, a negative length or one longer than
// the sequence, ragged token rows) returns an error and allocates nothing.
//
// # Growable masks
//
// A Growable is one request's mask, laid out token-major ([length, batch])
// so that the mask of the tokens so far is a contiguous prefix: View
// returns exactly the current length, Append copies only the new bytes,
// and growth doubles the capacity, so n tokens cost O(log n) allocations.
// An Append that does not grow makes no Go allocations. A Growable belongs
// to one request and is not safe for concurrent use.
//
// # Rebuild detection
//
// A Builder remembers, per call site and request labels, the masks it
// made. A second mask from the same line for the same request is a
// rebuild: it is counted (Builder.Rebuilds, and track.EventMaskRebuilt in
// the allocator's tracker), reported (OnRebuild, by default a log warning
// naming the line and the request, with the advice to build once and grow
// with Append), and with Strict it is refused with an error matching
// ErrMaskRebuilt. Builder documents exactly what counts.
//
// # Errors for bad input
//
// Each entry point refuses bad input with an error matching one sentinel
// (errors.Is), before it allocates anything:
//
//   - NewBuilder: tensor.ErrNilAllocator for a nil allocator;
//     ErrInvalidOption for a nil option or a bad value (a dtype masks are
//     not made of, a negative MaxLength).
//   - Builder.Causal, Padding, CausalPadding: ErrInvalidLength for a
//     negative length or one past seqLen; ErrEmptyBatch for no lengths.
//   - Builder.PaddingFromTokens: ErrEmptyBatch for no rows;
//     ErrShapeMismatch for rows of different lengths.
//   - Builder.NewGrowable: ErrEmptyBatch for a batch below 1;
//     ErrInvalidLength for a capacity below 1. Growable.Append:
//     ErrInvalidLength for a negative count, ErrCapacity past MaxLength;
//     Growable.AppendValid: ErrShapeMismatch for a slice not of the batch.
//   - NewCache: ErrInvalidOption for a nil option or a negative bound;
//     track.ErrNilTracker (and ErrInvalidOption) for CacheTracker(nil).
//   - Cache.Put and Cache.GetOrBuild: ErrKeyTooLong past MaxKeyBytes;
//     ErrNilMask for a nil mask (or a build function's nil result);
//     ErrInvalidOption for a nil build function; ErrNilCache on a nil
//     *Cache; ErrCacheClosed once closed.
//
// # Concurrency
//
// Builder and Cache are safe for concurrent use; a Growable is not. No
// function in this package starts a goroutine.
package mask
