package invariants_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tensorlife/tensorlife/internal/invariants"
)

var errDoubleFree = errors.New("double free")

// free is misuse detection as the library writes it: the error is returned,
// or raised when the invariants are on.
func free() error {
	if invariants.Enabled {
		panic(errDoubleFree)
	}
	return errDoubleFree
}

func Example() {
	// The same check holds in both builds.
	err, panicked := invariants.Recover(free)
	fmt.Println(err, panicked == invariants.Enabled)
	// Output: double free true
}

func TestRecover(t *testing.T) {
	err, panicked := invariants.Recover(func() error { return nil })
	assert.NoError(t, err)
	assert.False(t, panicked)
	err, panicked = invariants.Recover(func() error { panic("not an error") })
	assert.True(t, panicked)
	assert.ErrorContains(t, err, "not an error")
	err, panicked = invariants.Recover(free)
	assert.ErrorIs(t, err, errDoubleFree)
	assert.Equal(t, invariants.Enabled, panicked)
}
