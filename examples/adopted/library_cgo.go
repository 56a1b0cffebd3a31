//go:build cgo

package main

/*
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// The "library": its device memory is C memory.
static uintptr_t lib_alloc(int64_t n) {
	void *p = calloc(1, (size_t)n);
	return (uintptr_t)p;
}
static void lib_free(uintptr_t p, int64_t n) { (void)n; free((void *)p); }
static void lib_copy_in(uintptr_t dst, const void *src, size_t n) { memcpy((void *)dst, src, n); }
static void lib_copy_out(void *dst, uintptr_t src, size_t n) { memcpy(dst, (const void *)src, n); }
static void lib_memset(uintptr_t dst, int v, size_t n) { memset((void *)dst, v, n); }
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/tensorlife/tensorlife/tensor"
)

// cgoLibrary says which library this binary holds.
const cgoLibrary = true

// OpenLibrary opens the C library with an arena of capacity bytes, offered
// as a device named name.
func OpenLibrary(name string, capacity int64) (*Library, error) {
	if capacity <= 0 {
		return nil, fmt.Errorf("%w: library capacity %d", tensor.ErrInvalidSize, capacity)
	}
	d := &cDevice{name: name, capacity: capacity, live: map[tensor.DevicePtr]int64{}}
	return &Library{dev: d, closer: d.close}, nil
}

// cDevice is the library's arena as a tensor.Device: tensorlife allocates
// from it too, so both kinds of buffer share its capacity, as on a GPU.
// It checks every pointer against the blocks it handed out.
type cDevice struct {
	name     string
	capacity int64
	mu       sync.Mutex
	used     int64
	live     map[tensor.DevicePtr]int64
}

func (d *cDevice) Name() string { return d.name }

func (d *cDevice) Alloc(bytes int64) (tensor.DevicePtr, error) {
	if bytes <= 0 {
		return 0, d.err("alloc", bytes, tensor.ErrInvalidSize)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if bytes > d.capacity-d.used {
		return 0, d.err("alloc", bytes, tensor.ErrOutOfMemory)
	}
	p := tensor.DevicePtr(C.lib_alloc(C.int64_t(bytes)))
	if p == 0 {
		return 0, d.err("alloc", bytes, tensor.ErrOutOfMemory)
	}
	d.used += bytes
	d.live[p] = bytes
	return p, nil
}

func (d *cDevice) Free(p tensor.DevicePtr, bytes int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, ok := d.live[p]
	if !ok {
		return d.err("free", bytes, tensor.ErrInvalidPointer)
	}
	if n != bytes {
		return d.err("free", bytes, tensor.ErrSizeMismatch)
	}
	delete(d.live, p)
	d.used -= bytes
	C.lib_free(C.uintptr_t(p), C.int64_t(bytes))
	return nil
}

func (d *cDevice) MemInfo() (free, total int64, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.capacity - d.used, d.capacity, nil
}

// span checks that n bytes at p lie in one live block. Called with d.mu.
func (d *cDevice) span(op string, p tensor.DevicePtr, n int64) error {
	for start, size := range d.live {
		if p >= start && int64(p-start)+n <= size {
			return nil
		}
	}
	return d.err(op, n, tensor.ErrInvalidPointer)
}

func (d *cDevice) CopyToDevice(dst tensor.DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.span("copy to device", dst, int64(len(src))); err != nil {
		return err
	}
	C.lib_copy_in(C.uintptr_t(dst), unsafe.Pointer(&src[0]), C.size_t(len(src)))
	return nil
}

func (d *cDevice) CopyToHost(dst []byte, src tensor.DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.span("copy to host", src, int64(len(dst))); err != nil {
		return err
	}
	C.lib_copy_out(unsafe.Pointer(&dst[0]), C.uintptr_t(src), C.size_t(len(dst)))
	return nil
}

func (d *cDevice) Memset(dst tensor.DevicePtr, value byte, bytes int64) error {
	if bytes == 0 {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.span("memset", dst, bytes); err != nil {
		return err
	}
	C.lib_memset(C.uintptr_t(dst), C.int(value), C.size_t(bytes))
	return nil
}

// close frees what is still allocated in the arena.
func (d *cDevice) close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for p, n := range d.live {
		C.lib_free(C.uintptr_t(p), C.int64_t(n))
	}
	clear(d.live)
	d.used = 0
	return nil
}

func (d *cDevice) err(op string, bytes int64, cause error) error {
	return &tensor.DeviceError{Op: op, Device: d.name, Bytes: bytes, Err: cause}
}
