package cuda

import (
	"maps"
	"slices"
	"sync"

	"github.com/tensorlife/tensorlife/tensor"
)

// fakeDriver is a CUDA driver made of Go memory, to test everything a Device
// does above the driver on machines without a GPU. It checks what it is given
// as strictly as the real driver, counts calls, and fails on request.
type fakeDriver struct {
	mu       sync.Mutex
	total    int64
	used     int64
	next     tensor.DevicePtr
	blocks   map[tensor.DevicePtr][]byte
	calls    map[string]int
	failNext map[string]int // op -> CUresult to return from its next call
	released bool
}

func newFakeDriver(total int64) *fakeDriver {
	return &fakeDriver{
		total:    total,
		next:     0x7f0000000000, // looks like a device address; never 0
		blocks:   make(map[tensor.DevicePtr][]byte),
		calls:    make(map[string]int),
		failNext: make(map[string]int),
	}
}

// fail makes the next call of op return the CUresult code.
func (f *fakeDriver) fail(op string, code int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failNext[op] = code
}

func (f *fakeDriver) callCounts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.calls)
}

// begin counts a call and returns the injected failure, if any. f.mu held.
func (f *fakeDriver) begin(op string) error {
	f.calls[op]++
	if f.released {
		return newDriverError(op, resultContextIsDestroyed, "ContextIsDestroyed")
	}
	if code, ok := f.failNext[op]; ok {
		delete(f.failNext, op)
		return newDriverError(op, code, "Injected")
	}
	return nil
}

// find returns the memory from p to the end of its block, as cuMemcpy would
// address it, or an InvalidValue error.
func (f *fakeDriver) find(op string, p tensor.DevicePtr, n int64) ([]byte, error) {
	for _, start := range slices.Sorted(maps.Keys(f.blocks)) {
		mem := f.blocks[start]
		if p >= start && p < start+tensor.DevicePtr(len(mem)) {
			rest := mem[p-start:]
			if n > int64(len(rest)) {
				break
			}
			return rest[:n], nil
		}
	}
	return nil, newDriverError(op, resultInvalidValue, "InvalidValue")
}

func (f *fakeDriver) alloc(bytes int64) (tensor.DevicePtr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("alloc"); err != nil {
		return 0, err
	}
	if bytes > f.total-f.used {
		return 0, newDriverError("alloc", resultOutOfMemory, "OutOfMemory")
	}
	p := f.next
	// 512-byte alignment, as cuMemAlloc, and a gap so that the bytes just
	// past a block belong to no block.
	f.next += tensor.DevicePtr((bytes+511)/512*512 + 512)
	f.blocks[p] = make([]byte, bytes)
	f.used += bytes
	return p, nil
}

func (f *fakeDriver) free(p tensor.DevicePtr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("free"); err != nil {
		return err
	}
	mem, ok := f.blocks[p]
	if !ok {
		return newDriverError("free", resultInvalidValue, "InvalidValue")
	}
	delete(f.blocks, p)
	f.used -= int64(len(mem))
	return nil
}

func (f *fakeDriver) memInfo() (free, total int64, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("meminfo"); err != nil {
		return 0, 0, err
	}
	return f.total - f.used, f.total, nil
}

func (f *fakeDriver) copyToDevice(dst tensor.DevicePtr, src []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("copy to device"); err != nil {
		return err
	}
	mem, err := f.find("copy to device", dst, int64(len(src)))
	if err != nil {
		return err
	}
	copy(mem, src)
	return nil
}

func (f *fakeDriver) copyToHost(dst []byte, src tensor.DevicePtr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("copy to host"); err != nil {
		return err
	}
	mem, err := f.find("copy to host", src, int64(len(dst)))
	if err != nil {
		return err
	}
	copy(dst, mem)
	return nil
}

func (f *fakeDriver) memset(dst tensor.DevicePtr, value byte, bytes int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("memset"); err != nil {
		return err
	}
	mem, err := f.find("memset", dst, bytes)
	if err != nil {
		return err
	}
	for i := range mem {
		mem[i] = value
	}
	return nil
}

func (f *fakeDriver) release() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("close"); err != nil {
		return err
	}
	f.released = true
	return nil
}
