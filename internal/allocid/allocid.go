// Package allocid hands out the process-unique identities that allocators
// stamp into the high bits of tensor.Block.Tag, so that a block released to
// an allocator that did not hand it out is caught. Package tensor's
// DeviceAllocator and package pool draw from the same counter.
package allocid

import "sync/atomic"

var next atomic.Uint32

// New returns an identity no other allocator of the process has.
func New() uint32 { return next.Add(1) }
