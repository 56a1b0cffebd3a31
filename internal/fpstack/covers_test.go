package fpstack_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/fpstack"
)

type capturer struct{ walked, called []uintptr }

// capture takes both captures into buffers of 32.
//
//go:noinline
func (c *capturer) capture() {
	var w, p [32]uintptr
	n, ok := fpstack.Walk(1, w[:])
	if !ok {
		return
	}
	m := fpstack.Callers(1, p[:])
	c.walked, c.called = w[:n], p[:m]
}

// methodValue hides c.capture behind a func value: its "-fm" wrapper is a
// frame the walk holds and runtime.Callers leaves out.
var methodValue = func(c *capturer) func() { return c.capture }

//go:noinline
func descendTo(leaf func(), n int) {
	if n == 0 {
		leaf()
		return
	}
	descendTo(leaf, n-1)
}

// A walk cut at its buffer with a wrapper in it holds one logical frame
// fewer than runtime.Callers: the two agree, but the walk does not cover
// the capture, so it must not key it.
func TestCoversRefusesAWalkCutShortOfCallers(t *testing.T) {
	if !fpstack.Enabled() {
		t.Skip("frame-pointer capture is off")
	}
	short, deep := 0, 0
	for depth := 10; depth <= 40; depth++ {
		c := &capturer{}
		descendTo(methodValue(c), depth)
		require.NotEmpty(t, c.walked)
		assert.True(t, fpstack.Agree(c.walked, c.called, 32), "depth %d", depth)
		switch {
		case len(c.walked) < 32:
			short++
			assert.True(t, fpstack.Covers(c.walked, c.called, 32), "depth %d: a whole walk covers", depth)
		case len(c.called) == 32:
			deep++
			assert.False(t, fpstack.Covers(c.walked, c.called, 32),
				"depth %d: a walk of 32 physical frames, one a wrapper, ends before runtime.Callers' 32", depth)
		}
	}
	assert.Positive(t, short)
	assert.Positive(t, deep)
}
