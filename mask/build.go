package mask

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/tensorlife/tensorlife/internal/invariants"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// Kind is the tensor kind of every mask this package makes; it is recorded
// with the allocation, so profiles and metrics can tell masks apart.
const Kind = "mask"

// chunkBytes bounds the host memory a builder stages at once: masks larger
// than this are written to the device in pieces, so building a large mask
// never holds a second full copy of it in Go memory.
const chunkBytes = 64 << 10

// Builder makes attention masks from an Allocator (normally a *pool.Pool)
// and watches how they are made: a call site that builds a second mask for
// the same request, instead of building one and growing it, is reported as
// a rebuild (see Rebuild).
//
// Every mask is a *tensor.Tensor of kind Kind, owned by the caller, who
// must Free it. The builders validate their inputs before allocating, so
// bad input returns an error and allocates nothing.
//
// What counts as a rebuild: a mask made at a call site under request
// labels (track.WithLabels) for which the Builder remembers an earlier mask
// from the same site and labels. A call site is the whole call stack, as
// the tracker's track.Site is (the Builder captures its own stack only
// when the allocator has no tracker, or a full stack table), so a helper
// that builds masks counts once per line that calls it, and a loop counts
// as one site. A request is remembered while it is among the
// RememberRequests pairs that built masks most recently; a request whose
// previous mask is still live is additionally reported with PreviousLive
// set, the pattern that leaks.
// Masks made under a context with no labels are never reported: without
// them, concurrent requests at one site cannot be told apart. A Growable's
// own growth is not a rebuild: it is the intended way to lengthen a mask.
//
// A Builder is safe for concurrent use.
type Builder struct {
	alloc    tensor.Allocator
	cfg      builderConfig
	enc      encoding
	det      *detector // nil when detection is off
	rebuilds atomic.Int64
	// ownSites interns the stacks the Builder captures itself; see ownSite.
	ownSites func() *track.Tracker
}

// NewBuilder returns a Builder that draws masks from alloc. Options are
// validated here; an invalid one returns an error matching
// ErrInvalidOption.
func NewBuilder(alloc tensor.Allocator, opts ...BuilderOption) (*Builder, error) {
	if invariants.IsNil(alloc) {
		return nil, fmt.Errorf("mask: NewBuilder: %w", tensor.ErrNilAllocator)
	}
	cfg, err := newBuilderConfig(opts)
	if err != nil {
		return nil, err
	}
	enc, err := encodingOf(cfg.dtype)
	if err != nil {
		return nil, err // unreachable: DType validated it
	}
	b := &Builder{alloc: alloc, cfg: cfg, enc: enc}
	if cfg.detect {
		b.det = newDetector(cfg.remember)
		b.ownSites = sync.OnceValue(func() *track.Tracker {
			tr, _ := track.New(track.Name("mask.Builder sites"), track.MaxSites(maxReportSites)) // valid options
			return tr
		})
	}
	return b, nil
}

// Allocator returns the allocator masks are drawn from.
func (b *Builder) Allocator() tensor.Allocator { return b.alloc }

// DType returns the element type of the masks this Builder makes.
func (b *Builder) DType() tensor.DType { return b.enc.dtype }

// Rebuilds returns how many rebuilds this Builder has detected, refused
// ones (Strict) included.
func (b *Builder) Rebuilds() int64 { return b.rebuilds.Load() }

// Padding makes a [batch, seqLen] padding mask: sequence i attends to
// positions 0..lengths[i]-1 and not to the padding after them. Each length
// must lie in 0..seqLen.
func (b *Builder) Padding(ctx context.Context, lengths []int, seqLen int) (*tensor.Tensor, error) {
	if err := checkLengths(lengths, seqLen); err != nil {
		return nil, fmt.Errorf("mask: Padding: %w", err)
	}
	t, err := b.newMask(ctx, tensor.Shape{len(lengths), seqLen})
	if err != nil {
		return nil, fmt.Errorf("mask: Padding: %w", err)
	}
	w := b.writer(t)
	for _, n := range lengths {
		w.prefix(n, seqLen)
	}
	return b.finish(t, w.flush())
}

// PaddingFromTokens makes a [batch, seqLen] padding mask from token ids: a
// position attends unless its token is padID, wherever the padding lies
// (left, right, or inside a packed row). tokens holds one row per sequence;
// every row must have the same length, seqLen.
func (b *Builder) PaddingFromTokens(ctx context.Context, tokens [][]int32, padID int32) (*tensor.Tensor, error) {
	if len(tokens) == 0 {
		return nil, fmt.Errorf("mask: PaddingFromTokens: %w", ErrEmptyBatch)
	}
	seqLen := len(tokens[0])
	for i, row := range tokens {
		if len(row) != seqLen {
			return nil, fmt.Errorf("mask: PaddingFromTokens: %w: row %d has %d tokens, row 0 has %d",
				ErrShapeMismatch, i, len(row), seqLen)
		}
	}
	t, err := b.newMask(ctx, tensor.Shape{len(tokens), seqLen})
	if err != nil {
		return nil, fmt.Errorf("mask: PaddingFromTokens: %w", err)
	}
	w := b.writer(t)
	for _, row := range tokens {
		for start := 0; start < len(row); {
			end := start + 1
			pad := row[start] == padID
			for end < len(row) && (row[end] == padID) == pad {
				end++
			}
			w.run(!pad, end-start)
			start = end
		}
	}
	return b.finish(t, w.flush())
}

// Causal makes a [seqLen, seqLen] causal mask: query i attends to keys
// 0..i.
func (b *Builder) Causal(ctx context.Context, seqLen int) (*tensor.Tensor, error) {
	if seqLen < 0 {
		return nil, fmt.Errorf("mask: Causal: %w: sequence length %d", ErrInvalidLength, seqLen)
	}
	t, err := b.newMask(ctx, tensor.Shape{seqLen, seqLen})
	if err != nil {
		return nil, fmt.Errorf("mask: Causal: %w", err)
	}
	w := b.writer(t)
	for i := range seqLen {
		w.prefix(i+1, seqLen)
	}
	return b.finish(t, w.flush())
}

// CausalPadding makes a [batch, seqLen, seqLen] mask combining both: in
// sequence s, query i attends to key j when j <= i and j < lengths[s].
// Queries in the padding keep attending to the sequence's real tokens, so
// no row is masked everywhere unless its length is 0.
func (b *Builder) CausalPadding(ctx context.Context, lengths []int, seqLen int) (*tensor.Tensor, error) {
	if err := checkLengths(lengths, seqLen); err != nil {
		return nil, fmt.Errorf("mask: CausalPadding: %w", err)
	}
	t, err := b.newMask(ctx, tensor.Shape{len(lengths), seqLen, seqLen})
	if err != nil {
		return nil, fmt.Errorf("mask: CausalPadding: %w", err)
	}
	w := b.writer(t)
	for _, n := range lengths {
		for i := range seqLen {
			w.prefix(min(i+1, n), seqLen)
		}
	}
	return b.finish(t, w.flush())
}

func checkLengths(lengths []int, seqLen int) error {
	if len(lengths) == 0 {
		return ErrEmptyBatch
	}
	if seqLen < 0 {
		return fmt.Errorf("%w: sequence length %d", ErrInvalidLength, seqLen)
	}
	for i, n := range lengths {
		if n < 0 || n > seqLen {
			return fmt.Errorf("%w: length %d of sequence %d, want 0..%d", ErrInvalidLength, n, i, seqLen)
		}
	}
	return nil
}

// newMask allocates a mask tensor and runs rebuild detection on it. In
// strict mode a rebuild frees the tensor and returns the *RebuildError.
func (b *Builder) newMask(ctx context.Context, shape tensor.Shape) (*tensor.Tensor, error) {
	t, err := tensor.Make(ctx, b.alloc, tensor.Spec{DType: b.enc.dtype, Shape: shape, Kind: Kind})
	if err != nil {
		return nil, err
	}
	if err := b.observe(ctx, t, nil); err != nil {
		return nil, joinFree(err, t)
	}
	return t, nil
}

// finish returns t, or frees it if filling it failed.
func (b *Builder) finish(t *tensor.Tensor, err error) (*tensor.Tensor, error) {
	if err != nil {
		return nil, joinFree(fmt.Errorf("mask: writing %v: %w", t, err), t)
	}
	return t, nil
}

// joinFree frees t after err, keeping both errors.
func joinFree(err error, t *tensor.Tensor) error {
	if ferr := t.Free(); ferr != nil {
		return fmt.Errorf("%w (and freeing the mask: %w)", err, ferr)
	}
	return err
}

// writer streams a mask's elements to its tensor through a bounded host
// buffer, in order. The first error sticks and is returned by flush.
type writer struct {
	t   *tensor.Tensor
	enc *encoding
	buf []byte
	n   int   // bytes staged in buf
	off int64 // device offset of buf[0]
	err error
}

func (b *Builder) writer(t *tensor.Tensor) *writer {
	size := min(t.Bytes(), chunkBytes)
	size -= size % int64(b.enc.size)
	return &writer{t: t, enc: &b.enc, buf: make([]byte, size)}
}

// prefix writes a row of rowLen elements whose first n attend.
func (w *writer) prefix(n, rowLen int) {
	w.run(true, n)
	w.run(false, rowLen-n)
}

// run writes count elements of one value.
func (w *writer) run(attend bool, count int) {
	for count > 0 && w.err == nil {
		if len(w.buf) < w.enc.size {
			// Unreachable while callers write exactly the tensor's elements.
			w.err = fmt.Errorf("%w: %d elements past the end of %v", tensor.ErrSizeMismatch, count, w.t)
			return
		}
		if w.n+w.enc.size > len(w.buf) {
			w.flush()
			if w.err != nil {
				return
			}
		}
		k := min(count, (len(w.buf)-w.n)/w.enc.size)
		w.n += w.enc.fill(w.buf[w.n:], attend, k)
		count -= k
	}
}

func (w *writer) flush() error {
	if w.err != nil || w.n == 0 {
		return w.err
	}
	w.err = w.t.CopyFromHostAt(w.off, w.buf[:w.n])
	w.off += int64(w.n)
	w.n = 0
	return w.err
}
