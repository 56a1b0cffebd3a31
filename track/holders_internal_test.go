package track

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heldBy reads the holder set in place and answers as heldByOf does for
// the record's holder list, through each state a record's handles pass.
func TestHeldByAgreesWithHolderList(t *testing.T) {
	tr, err := New()
	require.NoError(t, err)
	r := captureLeaf(t, tr)
	a, b := tr.Books().Caller(0, 1), tr.Books().Caller(0, 2)
	check := func(step string) {
		t.Helper()
		wantH, wantOK := heldByOf(r.holderList(r.leaked()))
		h, ok := r.heldBy()
		assert.Equal(t, wantOK, ok, step)
		assert.Equal(t, wantH, h, step)
	}
	check("own handle only")
	r.Hold(a, "View")
	check("own handle and a view")
	r.Unhold(nil, "")
	check("own handle freed")
	r.Hold(b, howOwn)
	check("an extra owner named as the own handle")
	r.Unhold(b, howOwn)
	r.markDropped(a, "View")
	check("view dropped")
	pcs := a.pcs
	for i := range maxHolders + 1 {
		r.Hold(tr.Books().Intern([]uintptr{pcs[0] + uintptr(i)}), "Retain")
	}
	require.Positive(t, r.holders.Load().other.live)
	check("holders past the bound")
	r.Unhold(a, "View")
	check("dropped view only among the first")
	require.NoError(t, r.Release())
}
