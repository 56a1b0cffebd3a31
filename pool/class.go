package pool

import "math/bits"

// The size-class table (see the package doc for the reasoning):
//
//	request             class step            classes
//	1 B – 64 KiB        512 B                 128
//	64 KiB – 1 MiB      1/8 of the power of 2 32   (8 KiB … 64 KiB)
//	1 MiB – 64 GiB      1/4 of the power of 2 64   (256 KiB … 8 GiB)
//	over 64 GiB         none: 2 MiB multiple, never cached
const (
	smallStep  = 512
	smallMax   = 64 << 10
	mediumMax  = 1 << 20
	largeMax   = 64 << 30
	hugeStep   = 2 << 20
	numSmall   = smallMax / smallStep // 128
	mediumDivs = 8
	largeDivs  = 4
	numMedium  = (20 - 16) * mediumDivs // 2^16 .. 2^20
	numLarge   = (36 - 20) * largeDivs  // 2^20 .. 2^36
	numClasses = numSmall + numMedium + numLarge

	// hugeClass marks a block above largeMax: exact (rounded) size, never
	// cached.
	hugeClass = numClasses

	// maxRequest is the largest request the pool accepts (4 EiB): far beyond
	// any device, and small enough that sums of reserved bytes cannot
	// overflow int64.
	maxRequest = 1 << 62
)

// classSizes[c] is the block size of class c.
var classSizes = func() [numClasses]int64 {
	var s [numClasses]int64
	for c := range numSmall {
		s[c] = int64(c+1) * smallStep
	}
	c := numSmall
	for k := 16; k < 36; k++ {
		divs := mediumDivs
		if k >= 20 {
			divs = largeDivs
		}
		step := int64(1) << k / int64(divs)
		for j := 1; j <= divs; j++ {
			s[c] = int64(1)<<k + int64(j)*step
			c++
		}
	}
	return s
}()

// smallClassOf is classOf for a request of at most smallMax bytes, small
// enough to be inlined in the warm path, where classOf is not; ok is
// false for a larger one.
func smallClassOf(n int64) (class int, size int64, ok bool) {
	if n > smallMax {
		return 0, 0, false
	}
	c := int((n + smallStep - 1) / smallStep)
	return c - 1, int64(c) * smallStep, true
}

// classOf returns the size class of a request of n bytes (n > 0) and the
// block size that serves it. Requests above largeMax get hugeClass and n
// rounded up to hugeStep; ok is false above maxRequest.
func classOf(n int64) (class int, size int64, ok bool) {
	if c, size, ok := smallClassOf(n); ok {
		return c, size, true
	}
	if n > largeMax {
		if n > maxRequest {
			return 0, 0, false
		}
		return hugeClass, (n + hugeStep - 1) &^ (hugeStep - 1), true
	}
	// 2^k < n <= 2^(k+1), 16 <= k < 36.
	k := bits.Len64(uint64(n-1)) - 1
	base, divs := numSmall+(k-16)*mediumDivs, int64(mediumDivs)
	if k >= 20 {
		base, divs = numSmall+numMedium+(k-20)*largeDivs, largeDivs
	}
	step := int64(1) << k / divs
	j := (n - int64(1)<<k + step - 1) / step // 1..divs
	return base + int(j) - 1, int64(1)<<k + j*step, true
}
