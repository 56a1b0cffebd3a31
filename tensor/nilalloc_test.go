package tensor

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tensorlife/tensorlife/internal/invariants"
	"github.com/tensorlife/tensorlife/track"
)

// Allocators of every kind a type can be, for nilAllocator against
// invariants.IsNil.
type (
	ptrAlloc   struct{ _ int }
	sliceAlloc []byte
	mapAlloc   map[int]int
	funcAlloc  func()
	valueAlloc struct{ p *int } // one pointer: held as the data word itself
	emptyAlloc struct{}
)

func (*ptrAlloc) Device() Device                 { return nil }
func (*ptrAlloc) Tracker() *track.Tracker        { return nil }
func (*ptrAlloc) Allocate(int64) (Block, error)  { return Block{}, nil }
func (*ptrAlloc) Release(Block) error            { return nil }
func (sliceAlloc) Device() Device                { return nil }
func (sliceAlloc) Tracker() *track.Tracker       { return nil }
func (sliceAlloc) Allocate(int64) (Block, error) { return Block{}, nil }
func (sliceAlloc) Release(Block) error           { return nil }
func (mapAlloc) Device() Device                  { return nil }
func (mapAlloc) Tracker() *track.Tracker         { return nil }
func (mapAlloc) Allocate(int64) (Block, error)   { return Block{}, nil }
func (mapAlloc) Release(Block) error             { return nil }
func (funcAlloc) Device() Device                 { return nil }
func (funcAlloc) Tracker() *track.Tracker        { return nil }
func (funcAlloc) Allocate(int64) (Block, error)  { return Block{}, nil }
func (funcAlloc) Release(Block) error            { return nil }
func (valueAlloc) Device() Device                { return nil }
func (valueAlloc) Tracker() *track.Tracker       { return nil }
func (valueAlloc) Allocate(int64) (Block, error) { return Block{}, nil }
func (valueAlloc) Release(Block) error           { return nil }
func (emptyAlloc) Device() Device                { return nil }
func (emptyAlloc) Tracker() *track.Tracker       { return nil }
func (emptyAlloc) Allocate(int64) (Block, error) { return Block{}, nil }
func (emptyAlloc) Release(Block) error           { return nil }

func TestNilAllocatorIsIsNil(t *testing.T) {
	x := 1
	for _, tc := range []struct {
		name  string
		alloc Allocator
		isNil bool
	}{
		{"nil", nil, true},
		{"nil pointer", (*ptrAlloc)(nil), true},
		{"pointer", &ptrAlloc{}, false},
		{"nil slice", sliceAlloc(nil), true},
		{"slice", sliceAlloc{1}, false},
		{"nil map", mapAlloc(nil), true},
		{"map", mapAlloc{}, false},
		{"nil func", funcAlloc(nil), true},
		{"func", funcAlloc(func() {}), false},
		{"struct of a nil pointer", valueAlloc{}, false},
		{"struct of a pointer", valueAlloc{p: &x}, false},
		{"empty struct", emptyAlloc{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.isNil, nilAllocator(tc.alloc))
			assert.Equal(t, invariants.IsNil(tc.alloc), nilAllocator(tc.alloc))
		})
	}
}
