// Package cuda is the memory of an NVIDIA GPU as a tensor.Device, on the CUDA
// driver API through gorgonia.org/cu.
//
//	dev, err := cuda.Open(0)
//	if err != nil {
//		// errors.Is(err, tensor.ErrNoDevice): no such GPU, or a binary built
//		// without CUDA. Fall back to tensor.NewHostDevice, or give up.
//		return err
//	}
//	defer dev.Close()
//
// A Device does raw allocation only (cuMemAlloc, cuMemFree, copies, memset,
// cuMemGetInfo); put a pool in front of it to cache blocks and budget memory,
// and allocate tensors from the pool. Every failure is a *tensor.DeviceError
// with the operation, the size and the device ("cuda:0"), which matches the
// tensor sentinels with errors.Is: the driver's CUDA_ERROR_OUT_OF_MEMORY
// matches tensor.ErrOutOfMemory. A Device also checks what it is given
// before the driver sees it: sizes, pointers it did not hand out, copies that
// run past the end of a block.
//
// # Building
//
// CUDA support needs cgo, the CUDA headers and the driver library, and sits
// behind the cuda build tag. Without the tag the package still compiles
// (Enabled is false), and Open fails with an error matching
// tensor.ErrNoDevice that says how to build with CUDA; `go test ./...` needs
// no GPU. To build with CUDA on a machine without a CUDA toolkit, fetch the
// headers and the driver library from Debian's packages into .cache/cuda
// (about 800 MB to download once; later runs reuse the cache):
//
//	eval "$(scripts/cuda-env.sh)"
//	go vet -tags cuda ./tensor/cuda/
//	go build -tags cuda ./...
//
// The script prints CGO_CFLAGS and CGO_LDFLAGS for the cache; a machine with
// the CUDA toolkit in /usr/local/cuda needs neither. The binary links
// libcuda.so.1 by name and uses the driver installed where it runs.
//
// # Running
//
// A binary built with -tags cuda needs a GPU and its driver when it starts,
// not only when it calls Open: without libcuda.so.1 the dynamic loader
// refuses to start it, and the init function of gorgonia.org/cu calls cuInit
// and, if that fails (no device, a driver that does not match the kernel
// module), prints a message and exits the process with status 1. So Open can report a missing ordinal but
// never a missing driver, and a test binary built with the tag cannot skip
// its tests on a machine without a GPU: it exits before they run. Build
// CUDA binaries for GPU machines only; elsewhere build without the tag, or
// run them on the fake driver.
//
// The fake driver (scripts/fakecuda.sh) is a libcuda.so.1 made of host
// memory, which CI puts first on LD_LIBRARY_PATH to run this package's tests,
// the conformance suite, the pool and the examples with the tag. It keeps
// the current context per OS thread and refuses what the real driver
// refuses, so a call from a thread without the context current fails there
// with CUDA_ERROR_INVALID_CONTEXT, as on a GPU; environment variables inject
// driver failures. scripts/gpu-check.sh builds the tests, benchmarks and
// examples to run on a GPU machine, which needs no Go.
//
// # Heap dumps in tests
//
// When a test asks track/tracktest for the retainers of leaked tensors, a
// heap dump is written, and on Go 1.26 a goroutine leaving a cgo call during
// the dump can crash the process. So, once retainer search is on in a
// process (tests only), every driver call of every Device passes a shared
// fence, and the dump waits for the calls in flight and keeps new ones
// waiting until it is written. Otherwise the fence costs one atomic load
// per call.
//
// # Goroutines and the CUDA context
//
// The driver keeps a current context per OS thread, while Go runs a
// goroutine on whatever thread is free and may move it between any two cgo
// calls. Open retains the device's primary context once (the context the
// CUDA runtime and most libraries share), and every driver call a Device
// makes runs with the calling goroutine locked to its OS thread and that
// context made current on it, then the goroutine is unlocked again. Once a
// thread has the context current this costs a single cuCtxGetCurrent per
// call. Callers need no runtime.LockOSThread and no context handling, calls
// from many goroutines run in parallel, and the package starts no
// goroutines. A goroutine that has locked itself to a thread with a context
// of its own current gets that context back after each call. Close frees
// whatever is still allocated and releases the primary context.
//
// gorgonia.org/cu's Context type is not used: its frees return no error and
// leave a sticky last error behind, where a Device returns every error from
// the call that caused it.
package cuda
