package mask

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tensorlife/tensorlife/tensor"
)

// MaskedBias is the value additive float32 and bfloat16 masks hold where
// attention is masked; where it is allowed they hold 0. Float16 masks hold
// -65504, the most negative finite float16, because -1e9 does not fit.
//
// It is large and negative rather than -Inf or the most negative float:
// added to an attention score it cannot overflow to -Inf, its exponential
// is exactly 0 after the softmax's max subtraction, and a row that is masked
// everywhere gives a uniform softmax instead of NaN. Bfloat16 masks hold
// -1e9 rounded to bfloat16 (-998244352).
const MaskedBias = -1e9

// float16Lowest is the bit pattern of -65504, the most negative finite
// IEEE half-precision value.
const float16Lowest = 0xFBFF

// encoding is how one dtype spells "attend" and "masked", as the device's
// bytes. Device memory is little-endian on every device tensorlife runs on.
type encoding struct {
	dtype          tensor.DType
	size           int
	attend, masked [4]byte
}

func encodingOf(dt tensor.DType) (encoding, error) {
	e := encoding{dtype: dt, size: dt.Size()}
	switch dt {
	case tensor.Bool, tensor.Uint8:
		e.attend[0] = 1
	case tensor.Float32:
		binary.LittleEndian.PutUint32(e.masked[:], math.Float32bits(MaskedBias))
	case tensor.Float16:
		binary.LittleEndian.PutUint16(e.masked[:], float16Lowest)
	case tensor.BFloat16:
		binary.LittleEndian.PutUint16(e.masked[:], bfloat16Bits(MaskedBias))
	default:
		return encoding{}, fmt.Errorf("%w: %v (want bool, uint8, float32, float16 or bfloat16)", ErrUnsupportedDType, dt)
	}
	return e, nil
}

// bfloat16Bits rounds f to bfloat16, nearest even.
func bfloat16Bits(f float32) uint16 {
	b := math.Float32bits(f)
	b += 0x7FFF + (b>>16)&1
	return uint16(b >> 16)
}

// pattern returns the bytes of one element.
func (e *encoding) pattern(attend bool) []byte {
	if attend {
		return e.attend[:e.size]
	}
	return e.masked[:e.size]
}

// fill writes count elements of one value at the start of dst, which must
// hold them, and returns the bytes written. It doubles the written prefix
// rather than writing element by element, so long runs cost a few copies.
func (e *encoding) fill(dst []byte, attend bool, count int) int {
	n := count * e.size
	if n == 0 {
		return 0
	}
	dst = dst[:n]
	filled := copy(dst, e.pattern(attend))
	for filled < n {
		filled += copy(dst[filled:], dst[:filled])
	}
	return n
}
