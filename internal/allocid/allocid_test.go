package allocid_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tensorlife/tensorlife/internal/allocid"
)

func TestNewIsUnique(t *testing.T) {
	seen := map[uint32]bool{}
	for range 1000 {
		id := allocid.New()
		assert.False(t, seen[id], "id %d handed out twice", id)
		assert.NotZero(t, id)
		seen[id] = true
	}
}

func Example() {
	a, b := allocid.New(), allocid.New()
	fmt.Println(a != b)
	// Output: true
}
