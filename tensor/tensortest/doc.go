// Package tensortest holds what tests check devices and the code above them
// with, as net/http/httptest does for handlers: the conformance suite every
// tensor.Device passes, a device that fails allocations on purpose, and one
// whose methods panic. Code that draws on a tensor.Device or a
// tensor.Allocator (an allocator, a cache, a service's own error handling)
// can be tested against the faulty devices as tensorlife's own packages
// are. It imports no device but the host's, so a device's own tests
// (tensor/cuda's) may run the suite.
//
// # The conformance suite
//
// Run checks the behaviour every device must show, whatever memory it
// manages. Call it from a device's tests with a function that makes a fresh
// device:
//
//	func TestConformance(t *testing.T) {
//		tensortest.Run(t, func(t *testing.T, capacity int64) tensor.Device {
//			d, err := tensor.NewHostDevice(capacity)
//			require.NoError(t, err)
//			return d
//		})
//	}
//
// The suite checks allocation and free, copies both ways (also through
// pointers inside a block, made with DevicePtr.Add), memset, MemInfo,
// out-of-memory, the refusal of invalid sizes, pointers and ranges, and
// concurrent use (run it with -race). Every error must match the tensor
// sentinel for its cause with errors.Is and be a *tensor.DeviceError naming
// the device.
//
// NoDevice and NotFakeDriver end a CUDA test that finds no device, or not
// the fake driver it needs: a skip on a machine without one, a failure
// where the environment configures the fake driver (FakeCUDAEnv), as CI
// does, so that CI cannot pass with its CUDA tests skipped.
//
// # A device that fails on purpose
//
// Faulty wraps a tensor.Device with the faults that tests of allocators
// need to provoke: it fails chosen allocations (the Nth, or a seeded random
// fraction), counts the bytes and blocks outstanding on the device, and
// catches frees of pointers it never handed out, frees with the wrong size,
// and double frees, without passing them to the device it wraps. A test
// builds one over a tensor.HostDevice, hands it to the allocator under
// test, and checks afterwards that the allocator's own figures match
// Outstanding and that DoubleFrees is zero:
//
//	host, _ := tensor.NewHostDevice(4 << 20)
//	dev, _ := tensortest.NewFaulty(host, tensortest.FailFraction(0.1, 42))
//	p, _ := pool.New(dev)
//	...
//	blocks, bytes := dev.Outstanding()
//
// Only Alloc is ever failed on purpose; Free, copies, Memset and MemInfo go
// straight to the wrapped device once the pointer checks pass. A Faulty is
// safe for concurrent use; its bookkeeping takes one mutex, which is fine
// for tests.
//
// # A device that panics
//
// Hostile wraps a tensor.Device with chosen methods panicking (Name,
// Alloc, Free, MemInfo, the copies, Memset, UUID), for the tests that hold
// tensorlife to calling a device only under recover.
package tensortest
