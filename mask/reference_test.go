package mask

// The host reference: the simplest possible statement of what each mask
// holds, written without the package's code, that every builder is checked
// against byte for byte.

import (
	"encoding/binary"
	"math"

	"github.com/tensorlife/tensorlife/tensor"
)

// refElem spells one element of dtype dt.
func refElem(dt tensor.DType, attend bool) []byte {
	switch dt {
	case tensor.Bool, tensor.Uint8:
		if attend {
			return []byte{1}
		}
		return []byte{0}
	case tensor.Float32:
		if attend {
			return []byte{0, 0, 0, 0}
		}
		return binary.LittleEndian.AppendUint32(nil, math.Float32bits(-1e9))
	case tensor.Float16:
		if attend {
			return []byte{0, 0}
		}
		return []byte{0xFF, 0xFB} // -65504 little-endian
	case tensor.BFloat16:
		if attend {
			return []byte{0, 0}
		}
		return []byte{0x6E, 0xCE} // 0xCE6E: -998244352, -1e9 in bfloat16
	}
	panic("reference: no dtype " + dt.String())
}

func refBytes(dt tensor.DType, attend []bool) []byte {
	out := []byte{}
	for _, a := range attend {
		out = append(out, refElem(dt, a)...)
	}
	return out
}

func refPadding(dt tensor.DType, lengths []int, seqLen int) []byte {
	var attend []bool
	for _, n := range lengths {
		for j := 0; j < seqLen; j++ {
			attend = append(attend, j < n)
		}
	}
	return refBytes(dt, attend)
}

func refTokens(dt tensor.DType, tokens [][]int32, pad int32) []byte {
	var attend []bool
	for _, row := range tokens {
		for _, tok := range row {
			attend = append(attend, tok != pad)
		}
	}
	return refBytes(dt, attend)
}

func refCausal(dt tensor.DType, seqLen int) []byte {
	var attend []bool
	for i := 0; i < seqLen; i++ {
		for j := 0; j < seqLen; j++ {
			attend = append(attend, j <= i)
		}
	}
	return refBytes(dt, attend)
}

func refCausalPadding(dt tensor.DType, lengths []int, seqLen int) []byte {
	var attend []bool
	for _, n := range lengths {
		for i := 0; i < seqLen; i++ {
			for j := 0; j < seqLen; j++ {
				attend = append(attend, j <= i && j < n)
			}
		}
	}
	return refBytes(dt, attend)
}

// refGrowable lays tokens out token-major: tokens[t][s] is whether sequence
// s attends to token t.
func refGrowable(dt tensor.DType, tokens [][]bool) []byte {
	var attend []bool
	for _, tok := range tokens {
		attend = append(attend, tok...)
	}
	return refBytes(dt, attend)
}
