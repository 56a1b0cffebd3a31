#include "textflag.h"

// func getfp() uintptr
//
// getfp returns the frame pointer of its caller: the address of the caller's
// frame record, which holds the caller's caller's frame pointer at 0(BP) and
// the caller's return address at 8(BP). NOFRAME keeps BP untouched here, so
// what is read is the Go caller's BP, not a frame of this stub.
TEXT ·getfp(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ BP, ret+0(FP)
	RET
