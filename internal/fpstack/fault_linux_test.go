package fpstack

import (
	"runtime/debug"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordBeforeHole maps two pages, takes the second away (unmap it, or
// forbid reading it) and returns the address of a frame record at the end
// of the first page whose saved frame pointer leads into the second: a
// step that every guard allows and that faults when it is read.
func recordBeforeHole(t *testing.T, unmap bool) uintptr {
	t.Helper()
	page := syscall.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, 2*page, syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANON)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Munmap(mem) })
	hole := uintptr(unsafe.Pointer(&mem[page]))
	if unmap {
		// syscall.Munmap would unmap the whole mapping; take one page.
		_, _, errno := syscall.Syscall(syscall.SYS_MUNMAP, hole, uintptr(page), 0)
		require.Zero(t, errno)
	} else {
		require.NoError(t, syscall.Mprotect(mem[page:], syscall.PROT_NONE))
	}
	record := (*[2]uintptr)(unsafe.Pointer(&mem[page-16]))
	record[0] = hole   // saved frame pointer: the next record is in the hole
	record[1] = 0x1001 // return address
	return uintptr(unsafe.Pointer(record))
}

// TestFaultIsRecovered walks a chain into memory that is not there: the
// fault becomes a recovered panic and a counted fallback, never a crash.
func TestFaultIsRecovered(t *testing.T) {
	for _, unmap := range []bool{true, false} {
		name := map[bool]string{true: "unmapped", false: "unreadable"}[unmap]
		t.Run(name, func(t *testing.T) {
			record := recordBeforeHole(t, unmap)
			var buf [8]uintptr
			before := Stats()
			n, ok := walkFrom(record, 0, buf[:])
			after := Stats()
			assert.False(t, ok)
			assert.Zero(t, n, "a faulted walk returns nothing")
			assert.Equal(t, uint64(1), after.Faults-before.Faults)
			assert.Equal(t, uint64(0), after.Refused-before.Refused)
			assert.Equal(t, uint64(1), after.Walks-before.Walks)
		})
	}
}

// TestFaultRestoresPanicOnFault checks that the walk leaves the
// goroutine's SetPanicOnFault setting as it found it, after a clean walk
// and after a fault.
func TestFaultRestoresPanicOnFault(t *testing.T) {
	requireWalks(t)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(false))
	record := recordBeforeHole(t, true)
	var buf [4]uintptr
	for _, setting := range []bool{false, true} {
		debug.SetPanicOnFault(setting)
		_, ok := Walk(0, buf[:])
		require.True(t, ok)
		assert.Equal(t, setting, debug.SetPanicOnFault(setting), "restored after a walk")
		_, ok = walkFrom(record, 0, buf[:])
		require.False(t, ok)
		assert.Equal(t, setting, debug.SetPanicOnFault(setting), "restored after a fault")
	}
}
