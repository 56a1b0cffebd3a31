#include "textflag.h"

// func getfp() uintptr
//
// getfp returns the frame pointer (R29) of its caller: the address of the
// caller's frame record, which holds the caller's caller's frame pointer at
// 0(R29) and the caller's saved link register (its return address) at
// 8(R29). NOFRAME keeps R29 untouched here.
TEXT ·getfp(SB), NOSPLIT|NOFRAME, $0-8
	MOVD R29, ret+0(FP)
	RET
