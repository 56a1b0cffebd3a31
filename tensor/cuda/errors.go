package cuda

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/tensorlife/tensorlife/tensor"
)

// DriverError is a failure code returned by the CUDA driver (a CUresult). It
// is never returned on its own: it is the Err of the *tensor.DeviceError that
// names the operation, the size and the device. It unwraps to the tensor
// sentinel the code stands for, where one applies:
//
//	CUDA_ERROR_OUT_OF_MEMORY                 tensor.ErrOutOfMemory
//	CUDA_ERROR_INVALID_VALUE in alloc        tensor.ErrInvalidSize
//	CUDA_ERROR_INVALID_VALUE elsewhere       tensor.ErrInvalidPointer
//	CUDA_ERROR_NO_DEVICE, _INVALID_DEVICE,
//	_NOT_INITIALIZED, _DEINITIALIZED,
//	_INVALID_CONTEXT, _CONTEXT_IS_DESTROYED  tensor.ErrNoDevice
//
// Other codes (a kernel's CUDA_ERROR_ILLEGAL_ADDRESS, say) match no sentinel;
// compare Code with the values in cuda.h.
type DriverError struct {
	// Code is the CUresult value, as defined in cuda.h.
	Code int
	// Name is the cuda.h name of the code, such as "CUDA_ERROR_OUT_OF_MEMORY".
	Name string

	sentinel error
}

// Error returns the code's name and number.
func (e *DriverError) Error() string { return fmt.Sprintf("cuda driver: %s (%d)", e.Name, e.Code) }

// Unwrap returns the tensor sentinel for the code, or nil.
func (e *DriverError) Unwrap() error { return e.sentinel }

// CUresult values from cuda.h that this package maps to tensor sentinels.
// They are part of the driver's stable ABI; cuda_device.go checks them
// against gorgonia.org/cu's constants at compile time.
const (
	resultInvalidValue       = 1
	resultOutOfMemory        = 2
	resultNotInitialized     = 3
	resultDeinitialized      = 4
	resultNoDevice           = 100
	resultInvalidDevice      = 101
	resultInvalidContext     = 201
	resultContextIsDestroyed = 709
)

// newDriverError classifies a driver result code for the operation op (one of
// the tensor.DeviceError Op values). name is the code's name, either in
// cuda.h form or in gorgonia.org/cu's CamelCase form ("OutOfMemory").
func newDriverError(op string, code int, name string) *DriverError {
	var sentinel error
	switch code {
	case resultOutOfMemory:
		sentinel = tensor.ErrOutOfMemory
	case resultInvalidValue:
		switch op {
		case "alloc":
			sentinel = tensor.ErrInvalidSize
		case "free", "copy to device", "copy to host", "memset":
			sentinel = tensor.ErrInvalidPointer
		}
	case resultNotInitialized, resultDeinitialized, resultNoDevice, resultInvalidDevice,
		resultInvalidContext, resultContextIsDestroyed:
		sentinel = tensor.ErrNoDevice
	}
	return &DriverError{Code: code, Name: cudaErrorName(name), sentinel: sentinel}
}

// cudaErrorName turns gorgonia.org/cu's name for a result ("OutOfMemory")
// into the one in cuda.h ("CUDA_ERROR_OUT_OF_MEMORY"), which is what
// operators search for. Names already in that form, and cu's
// "UnknownErrorCode:N", are returned as they are.
func cudaErrorName(name string) string {
	if name == "" || strings.HasPrefix(name, "CUDA_") || strings.ContainsAny(name, ": ") {
		return name
	}
	var b strings.Builder
	b.WriteString("CUDA_ERROR")
	prevLower := false
	for _, r := range name {
		if unicode.IsUpper(r) && (prevLower || b.Len() == len("CUDA_ERROR")) {
			b.WriteByte('_')
		}
		prevLower = unicode.IsLower(r) || unicode.IsDigit(r)
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}
