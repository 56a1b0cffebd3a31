//go:build amd64 || arm64

package fpstack

// supported reports that this architecture keeps a frame-pointer chain in
// every Go frame (always true on amd64 and arm64 since Go 1.7 and 1.12).
const supported = true

// getfp returns the frame pointer of its caller (fp_$GOARCH.s).
func getfp() uintptr
