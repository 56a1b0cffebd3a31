//go:build !amd64 && !arm64

package fpstack

// supported is false: the Go toolchain keeps no frame-pointer chain here,
// so Walk always refuses and Capture always uses runtime.Callers.
const supported = false

// getfp is never called where frame pointers are unsupported.
func getfp() uintptr { return 0 }
