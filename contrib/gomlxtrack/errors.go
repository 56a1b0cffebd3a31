package gomlxtrack

import (
	"errors"
	"fmt"
)

// Errors of the wrapped backends.
var (
	// ErrForeignBuffer is matched by the error a wrapped backend returns for
	// a buffer it did not make: one of another backend, of the backend it
	// wraps (made before Wrap, or by the unwrapped one), or nil.
	ErrForeignBuffer = errors.New("gomlxtrack: buffer of another backend")
	// ErrFinalized is matched by the error returned for a buffer used after
	// BufferFinalize, or after it was donated to an execution.
	ErrFinalized = errors.New("gomlxtrack: buffer finalized or donated")
	// ErrNilExec is matched by the error Exec returns for a nil program.
	ErrNilExec = errors.New("gomlxtrack: nil *graph.Exec")
)

// ForeignBufferError is the error a wrapped backend returns for a buffer it
// did not make. It matches ErrForeignBuffer.
type ForeignBufferError struct {
	Backend string // the name of the wrapped backend that was called
	Method  string // the method that was given the buffer
	Type    string // the buffer's Go type, "<nil>" for none
}

// Error names the backend, the method and the buffer's type.
func (e *ForeignBufferError) Error() string {
	return fmt.Sprintf("gomlxtrack: %s.%s: buffer of type %s was not made by this tracked backend "+
		"(a buffer of another backend, or of the one it wraps)", e.Backend, e.Method, e.Type)
}

// Unwrap returns ErrForeignBuffer.
func (e *ForeignBufferError) Unwrap() error { return ErrForeignBuffer }
