// Package ownalloc marks the allocators tensorlife makes itself
// (tensor.DeviceAllocator, pool.Pool). Each reads its device's name once,
// under recover, when it is made, and embeds a Mark that holds the name;
// tensor.New takes the name from the mark instead of calling
// Device().Name(), code it does not own, under recover on every tensor.
//
// The mark is sealed: Marked has an unexported method, which only
// embedding a Mark provides, and code outside this module cannot import
// this package. A type that embeds one of the module's allocators to
// override its methods gets the mark too, through promotion; Mark.Of
// therefore answers only for the allocator the mark was made for.
package ownalloc

// Mark is embedded, through an unexported alias, in an allocator of this
// module of type A (the interface New takes). The zero Mark marks
// nothing.
//
// A Mark's owner points back at the allocator that holds it: the pair is
// one object to the collector.
type Mark[A comparable] struct {
	owner      A
	deviceName string
}

// New returns the mark of owner, whose device is named deviceName.
func New[A comparable](owner A, deviceName string) Mark[A] {
	return Mark[A]{owner: owner, deviceName: deviceName}
}

// Marked is an allocator that embeds a Mark.
type Marked[A comparable] interface {
	mark() *Mark[A]
}

func (m *Mark[A]) mark() *Mark[A] { return m }

// DeviceName returns the device name that alloc's mark holds, if alloc,
// not nil, is the allocator it was made for: one of this module's, not a
// type that embeds one.
func DeviceName[A comparable](alloc A, marked Marked[A]) (name string, ok bool) {
	if m := marked.mark(); m.owner == alloc {
		return m.deviceName, true
	}
	return "", false
}
