package mask

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// Growable is one request's attention mask over the tokens it has seen so
// far, built once and extended as tokens are generated: the fix for a mask
// rebuilt at every decode step.
//
// Layout: the mask is token-major, [length, batch]. Element (t, s), at
// offset t*batch+s, says whether sequence s attends to key position t. Token
// major is what makes growth cheap: the mask of the first n tokens is the
// first n*batch elements, so View returns exactly the current length as one
// contiguous tensor, and appending a token writes batch contiguous elements
// at the end. A kernel that wants [batch, length] reads it with strides
// (1, batch). With batch 1 the two layouts coincide.
//
// Memory: the mask holds one tensor of capacity [capacity, batch]. Append
// copies only the new elements to the device. When the capacity is full,
// the mask allocates one of twice the capacity (never past the Builder's
// MaxLength), copies the valid prefix across through a host buffer the mask
// keeps, and frees the old tensor, so n tokens cost O(log n) allocations and
// an Append that does not grow makes no Go allocations. Growth allocations
// carry the labels of the context NewGrowable was given and are recorded
// at the Append that grew.
//
// A Growable belongs to one request: it is not safe for concurrent use,
// except Freed, which any goroutine may call. Free it when the request ends.
type Growable struct {
	b     *Builder
	ctx   context.Context // the request's labels only: growth allocations carry them
	t     *tensor.Tensor  // [capacity, batch]
	batch int
	// rowBytes is one token's bytes for the whole batch.
	rowBytes int64
	length   int
	capacity int
	// attend holds whole rows of "attend" elements, ready to copy: Append
	// writes from it without encoding anything.
	attend []byte
	// stage encodes AppendValid's row and carries growth copies.
	stage []byte
	freed atomic.Bool
}

// NewGrowable makes an empty growable mask for batch sequences with room
// for capacity tokens before its first growth (lowered to the Builder's
// MaxLength if it is larger). Make one per request; the
// Builder reports a second one from the same call site for the same
// request as a rebuild.
func (b *Builder) NewGrowable(ctx context.Context, batch, capacity int) (*Growable, error) {
	if batch < 1 {
		return nil, fmt.Errorf("mask: NewGrowable: %w: batch %d, want at least 1", ErrEmptyBatch, batch)
	}
	if capacity < 1 {
		return nil, fmt.Errorf("mask: NewGrowable: %w: capacity %d, want at least 1", ErrInvalidLength, capacity)
	}
	if b.cfg.maxLength > 0 {
		capacity = min(capacity, b.cfg.maxLength)
	}
	rowBytes, err := tensor.Shape{batch}.Bytes(b.enc.dtype)
	if err != nil {
		return nil, fmt.Errorf("mask: NewGrowable: %w", err)
	}
	if rowBytes > math.MaxInt/2 {
		return nil, fmt.Errorf("mask: NewGrowable: %w: batch %d", ErrCapacity, batch)
	}
	t, err := tensor.Make(ctx, b.alloc, tensor.Spec{DType: b.enc.dtype, Shape: tensor.Shape{capacity, batch}, Kind: Kind})
	if err != nil {
		return nil, fmt.Errorf("mask: NewGrowable: %w", err)
	}
	g := &Growable{b: b, ctx: labelsOnly(ctx), t: t, batch: batch, rowBytes: rowBytes, capacity: capacity}
	if err := b.observe(ctx, t, g); err != nil {
		g.freed.Store(true)
		return nil, joinFree(err, t)
	}
	// Enough attend rows that a prompt's worth of tokens takes few copies,
	// never more than one chunk; at least one row.
	rows := max(1, min(int64(capacity), chunkBytes/rowBytes))
	g.attend = make([]byte, rows*rowBytes)
	b.enc.fill(g.attend, true, int(rows)*batch)
	g.stage = make([]byte, rowBytes)
	return g, nil
}

// labelsOnly returns a context carrying ctx's labels and nothing else, so a
// Growable keeps no request deadline, cancellation or values alive.
func labelsOnly(ctx context.Context) context.Context {
	l := track.LabelsFrom(ctx)
	if l.Len() == 0 {
		return context.Background()
	}
	kv := make([]string, 0, 2*l.Len())
	l.Range(func(k, v string) bool {
		kv = append(kv, k, v)
		return true
	})
	return track.WithLabels(context.Background(), kv...)
}

// Append adds n tokens that every sequence attends to: a decode step is
// Append(1), a prompt of n tokens Append(n). On error (ErrCapacity, an
// allocation that failed while growing, tensor.ErrFreed) the mask is
// unchanged and still usable, unless it was freed.
func (g *Growable) Append(n int) error {
	if err := g.reserve(n); err != nil {
		return err
	}
	off := int64(g.length) * g.rowBytes
	left := int64(n) * g.rowBytes
	for left > 0 {
		k := min(left, int64(len(g.attend)))
		if err := g.t.CopyFromHostAt(off, g.attend[:k]); err != nil {
			// Whatever was written lies past Len, where nobody reads it.
			return fmt.Errorf("mask: Append: %w", err)
		}
		off += k
		left -= k
	}
	g.length += n
	return nil
}

// AppendValid adds one token; valid[s] says whether sequence s attends to
// it (false for a sequence that has finished, or padding). len(valid) must
// be the batch size.
func (g *Growable) AppendValid(valid []bool) error {
	if len(valid) != g.batch {
		return fmt.Errorf("mask: AppendValid: %w: %d values for a batch of %d", ErrShapeMismatch, len(valid), g.batch)
	}
	if err := g.reserve(1); err != nil {
		return err
	}
	enc := &g.b.enc
	for s, v := range valid {
		copy(g.stage[s*enc.size:], enc.pattern(v))
	}
	if err := g.t.CopyFromHostAt(int64(g.length)*g.rowBytes, g.stage[:g.rowBytes]); err != nil {
		return fmt.Errorf("mask: AppendValid: %w", err)
	}
	g.length++
	return nil
}

// reserve checks that n more tokens can be appended, growing if needed.
// On error the mask is unchanged.
func (g *Growable) reserve(n int) error {
	if g.freed.Load() {
		return fmt.Errorf("mask: append to a freed growable mask: %w", tensor.ErrFreed)
	}
	if n < 0 {
		return fmt.Errorf("mask: Append: %w: %d tokens", ErrInvalidLength, n)
	}
	if n <= g.capacity-g.length {
		return nil
	}
	limit := g.b.cfg.maxLength
	if limit == 0 {
		limit = int(math.MaxInt / g.rowBytes)
	}
	if n > limit-g.length {
		return fmt.Errorf("mask: Append: %w: %d tokens after %d, limit %d", ErrCapacity, n, g.length, limit)
	}
	need := g.length + n
	newCap := g.capacity
	for newCap < need {
		if newCap > limit/2 {
			newCap = limit
			break
		}
		newCap *= 2
	}
	return g.grow(newCap)
}

// grow moves the mask to a tensor of newCap tokens. The device has no
// device-to-device copy in tensor.Device, so the valid prefix travels
// through the mask's host buffer, a chunk at a time.
func (g *Growable) grow(newCap int) error {
	nt, err := tensor.Make(g.ctx, g.b.alloc, tensor.Spec{DType: g.b.enc.dtype, Shape: tensor.Shape{newCap, g.batch}, Kind: Kind})
	if err != nil {
		return fmt.Errorf("mask: growing to %d tokens: %w", newCap, err)
	}
	valid := int64(g.length) * g.rowBytes
	if want := min(valid, chunkBytes); int64(len(g.stage)) < want {
		g.stage = make([]byte, want)
	}
	for off := int64(0); off < valid; {
		k := min(valid-off, int64(len(g.stage)))
		buf := g.stage[:k]
		if err := g.t.CopyToHostAt(off, buf); err != nil {
			return joinFree(fmt.Errorf("mask: growing to %d tokens: %w", newCap, err), nt)
		}
		if err := nt.CopyFromHostAt(off, buf); err != nil {
			return joinFree(fmt.Errorf("mask: growing to %d tokens: %w", newCap, err), nt)
		}
		off += k
	}
	old := g.t
	g.t, g.capacity = nt, newCap
	if err := old.Free(); err != nil {
		return fmt.Errorf("mask: freeing the outgrown mask: %w", err)
	}
	return nil
}

// View returns a new handle on the current mask: [Len(), Batch()], exactly
// the tokens appended so far. The view is an owner: Free it when the kernel
// that reads it is done. A view taken before a growth keeps the old memory
// alive and keeps its contents; it does not see later appends.
func (g *Growable) View() (*tensor.Tensor, error) {
	if g.freed.Load() {
		return nil, fmt.Errorf("mask: view of a freed growable mask: %w", tensor.ErrFreed)
	}
	v, err := g.t.View(0, g.length, g.batch)
	if err != nil {
		return nil, fmt.Errorf("mask: View: %w", err)
	}
	return v, nil
}

// Len returns the number of tokens appended.
func (g *Growable) Len() int { return g.length }

// Cap returns the tokens the mask holds before it must grow.
func (g *Growable) Cap() int { return g.capacity }

// Batch returns the number of sequences.
func (g *Growable) Batch() int { return g.batch }

// DType returns the element type.
func (g *Growable) DType() tensor.DType { return g.b.enc.dtype }

// Bytes returns the device bytes the mask holds now (its capacity).
func (g *Growable) Bytes() int64 { return g.t.Bytes() }

// Freed reports whether Free has been called. It is safe to call from any
// goroutine.
func (g *Growable) Freed() bool { return g.freed.Load() }

// Free releases the mask's memory; views still held keep theirs until
// freed. A second Free returns the tensor's *tensor.DoubleFreeError.
func (g *Growable) Free() error {
	g.freed.Store(true)
	return g.t.Free()
}
