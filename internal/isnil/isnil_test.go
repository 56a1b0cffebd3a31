package isnil_test

import (
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tensorlife/tensorlife/internal/isnil"
)

func TestValue(t *testing.T) {
	var f *os.File
	var w io.Writer = f
	assert.True(t, isnil.Value(nil))
	assert.True(t, isnil.Value(w), "typed nil pointer in an interface")
	assert.True(t, isnil.Value((func())(nil)))
	assert.False(t, isnil.Value(os.Stdout))
	assert.False(t, isnil.Value(0))
}

func Example() {
	var f *os.File
	var w io.Writer = f
	fmt.Println(w == nil, isnil.Value(w))
	// Output: false true
}
