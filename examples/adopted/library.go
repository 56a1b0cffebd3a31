package main

import "github.com/tensorlife/tensorlife/tensor"

// Library stands for a cgo runtime (an inference engine, a tokenizer on the
// GPU) that allocates its own device memory and hands buffers to Go. Built
// with cgo, it is C code (library_cgo.go) over its own arena of C memory,
// which it also offers as a tensor.Device; without cgo, a pure-Go twin
// (library_nocgo.go) hands out blocks of a host device. Either way the
// buffers are allocated outside tensorlife.
type Library struct {
	dev    tensor.Device
	closer func() error
}

// Device is the device the library's buffers live on.
func (l *Library) Device() tensor.Device { return l.dev }

// Output hands out a buffer of bytes, as a runtime hands out an output.
// The caller owns it and gives it back with Release.
func (l *Library) Output(bytes int64) (tensor.DevicePtr, error) { return l.dev.Alloc(bytes) }

// Release gives a buffer from Output back to the library.
func (l *Library) Release(p tensor.DevicePtr, bytes int64) error { return l.dev.Free(p, bytes) }

// Close releases the library's arena.
func (l *Library) Close() error { return l.closer() }
