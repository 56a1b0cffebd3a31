//go:build !cgo

package main

import "github.com/tensorlife/tensorlife/tensor"

// cgoLibrary says which library this binary holds.
const cgoLibrary = false

// OpenLibrary opens the pure-Go twin of the library: its buffers are
// blocks of a host device of capacity bytes named name.
func OpenLibrary(name string, capacity int64) (*Library, error) {
	dev, err := tensor.NewHostDevice(capacity, tensor.DeviceName(name))
	if err != nil {
		return nil, err
	}
	return &Library{dev: dev, closer: func() error { return nil }}, nil
}
