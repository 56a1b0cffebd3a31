package ownalloc_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tensorlife/tensorlife/internal/ownalloc"
)

type allocator interface{ Alloc() }

type own struct {
	ownalloc.Mark[allocator]
}

func (*own) Alloc() {}

// embedder is a type of the user's that embeds one of the module's
// allocators: it gets the mark by promotion.
type embedder struct{ *own }

func TestMarkAnswersForItsOwnerOnly(t *testing.T) {
	a := &own{}
	a.Mark = ownalloc.New[allocator](a, "cuda:0")
	for _, tc := range []struct {
		name  string
		alloc allocator
		want  string
		ok    bool
	}{
		{"owner", a, "cuda:0", true},
		{"a type embedding it", embedder{a}, "", false},
		{"another allocator's mark", &own{}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, marked := tc.alloc.(ownalloc.Marked[allocator])
			assert.True(t, marked)
			name, ok := ownalloc.DeviceName(tc.alloc, m)
			assert.Equal(t, tc.want, name)
			assert.Equal(t, tc.ok, ok)
		})
	}
}

func ExampleDeviceName() {
	a := &own{}
	a.Mark = ownalloc.New[allocator](a, "cuda:0")
	var alloc allocator = a
	if m, ok := alloc.(ownalloc.Marked[allocator]); ok {
		name, ok := ownalloc.DeviceName(alloc, m)
		fmt.Println(name, ok)
	}
	// Output: cuda:0 true
}
