package track

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A PC that marks nothing is remembered all the same, so that later Helper
// calls from it return at the lookup.
func TestHelperRemembersPCsThatMarkNothing(t *testing.T) {
	const pc = 1 // in no function
	gen := helperMarks.gen.Load()
	markHelperPC(pc)
	_, seen := helperMarks.seen.Load(uintptr(pc))
	assert.True(t, seen)
	assert.Equal(t, gen, helperMarks.gen.Load(), "nothing marked")
}
