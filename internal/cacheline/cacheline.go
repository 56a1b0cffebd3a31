// Package cacheline names the one cache-line size tensorlife pads its hot
// structures to, so that a counter or a lock that goroutines on different
// cores update does not share a line with its neighbour (false sharing).
// Padding written with Size says what it is for, and changing the
// assumption is one edit rather than a hunt for literals.
package cacheline

// Size is the cache-line size, in bytes, that padding assumes: 64, the
// line of the amd64 cores tensorlife is measured on and what the Go runtime
// pads to there (internal/cpu.CacheLinePadSize). It is one constant on
// every architecture, so a structure's layout is the same everywhere; the
// runtime pads to 128 on arm64, and a per-architecture Size would be the
// place to follow it. Pad a structure to a multiple of Size with
//
//	_ [cacheline.Size - unsafe.Sizeof(data{})%cacheline.Size]byte
//
// which adds a whole line when the data already fills lines exactly.
const Size = 64
