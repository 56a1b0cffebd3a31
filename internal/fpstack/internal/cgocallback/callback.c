//go:build cgo

#include <stdint.h>
#include "_cgo_export.h"

// fpstack_call_go is an ordinary C frame between two Go frames.
void fpstack_call_go(uintptr_t handle) {
	fpstackGoCallback(handle);
}
