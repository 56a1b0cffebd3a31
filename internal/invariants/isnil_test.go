package invariants_test

import (
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tensorlife/tensorlife/internal/invariants"
)

func TestIsNil(t *testing.T) {
	var f *os.File
	var w io.Writer = f
	assert.True(t, invariants.IsNil(nil))
	assert.True(t, invariants.IsNil(w), "typed nil pointer in an interface")
	assert.True(t, invariants.IsNil((func())(nil)))
	assert.False(t, invariants.IsNil(os.Stdout))
	assert.False(t, invariants.IsNil(0))
}

func ExampleIsNil() {
	var f *os.File
	var w io.Writer = f
	//lint:ignore SA4023 the example shows that w == nil is false for a typed nil pointer
	fmt.Println(w == nil, invariants.IsNil(w))
	// Output: false true
}
