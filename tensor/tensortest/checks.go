package tensortest

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
)

func testAllocFree(t *testing.T, s *suite) {
	assert.NotEmpty(t, s.dev.Name(), "Name")
	sizes := []int64{1, 7, 256, 4096, 4096 + 17, s.cfg.capacity / 8}
	ptrs := make([]tensor.DevicePtr, len(sizes))
	for i, n := range sizes {
		ptrs[i] = s.alloc(t, n)
	}
	// Live blocks never overlap.
	for i := range sizes {
		for j := range sizes {
			if i == j {
				continue
			}
			a, b := uint64(ptrs[i]), uint64(ptrs[j])
			overlap := a < b+uint64(sizes[j]) && b < a+uint64(sizes[i])
			assert.False(t, overlap, "block %#x (%d bytes) overlaps block %#x (%d bytes)", a, sizes[i], b, sizes[j])
		}
	}
	// Each block holds its own bytes.
	for i, n := range sizes {
		require.NoError(t, s.dev.CopyToDevice(ptrs[i], pattern(n, byte(i))))
	}
	for i, n := range sizes {
		assert.True(t, bytes.Equal(pattern(n, byte(i)), s.read(t, ptrs[i], n)), "block %d (%d bytes) lost its contents", i, n)
	}
	for i, n := range sizes {
		s.free(t, ptrs[i], n)
	}
	// Freed memory can be allocated again.
	p := s.alloc(t, s.cfg.capacity/2)
	s.free(t, p, s.cfg.capacity/2)
}

func testCopyRoundTrip(t *testing.T, s *suite) {
	for _, n := range []int64{1, 3, 1024, 64<<10 + 5, s.cfg.capacity / 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			p := s.alloc(t, n)
			defer s.free(t, p, n)
			want := pattern(n, 0x5a)
			require.NoError(t, s.dev.CopyToDevice(p, want))
			assert.True(t, bytes.Equal(want, s.read(t, p, n)), "round trip of %d bytes changed them", n)
			// Copying nothing is allowed and changes nothing.
			require.NoError(t, s.dev.CopyToDevice(p, nil))
			require.NoError(t, s.dev.CopyToHost(nil, p))
			assert.True(t, bytes.Equal(want, s.read(t, p, n)))
		})
	}
}

func testCopyWithOffsets(t *testing.T, s *suite) {
	const n = 4096
	p := s.alloc(t, n)
	defer s.free(t, p, n)
	base := pattern(n, 1)
	require.NoError(t, s.dev.CopyToDevice(p, base))

	// Write into the middle through an interior pointer.
	patch := pattern(200, 2)
	require.NoError(t, s.dev.CopyToDevice(p.Add(100), patch))
	want := append([]byte(nil), base...)
	copy(want[100:], patch)
	assert.True(t, bytes.Equal(want, s.read(t, p, n)), "a copy to p+100 touched bytes outside [100, 300)")

	// Read a window through an interior pointer.
	assert.Equal(t, want[1000:1050], s.read(t, p.Add(1000), 50), "copy from p+1000")

	// A range that ends exactly at the end of the block is in bounds.
	tail := pattern(16, 3)
	require.NoError(t, s.dev.CopyToDevice(p.Add(n-16), tail))
	assert.Equal(t, tail, s.read(t, p.Add(n-16), 16), "copy to the last 16 bytes")
	assert.Equal(t, want[n-17], s.read(t, p.Add(n-17), 1)[0], "the byte before the tail changed")
}

func testMemset(t *testing.T, s *suite) {
	const n = 1000
	p := s.alloc(t, n)
	defer s.free(t, p, n)

	require.NoError(t, s.dev.Memset(p, 0xab, n))
	assert.Equal(t, bytes.Repeat([]byte{0xab}, n), s.read(t, p, n), "Memset of the whole block")

	require.NoError(t, s.dev.Memset(p.Add(10), 0x01, 20))
	want := bytes.Repeat([]byte{0xab}, n)
	copy(want[10:30], bytes.Repeat([]byte{0x01}, 20))
	assert.Equal(t, want, s.read(t, p, n), "Memset of [10, 30) through an interior pointer")

	// Zero bytes sets nothing.
	require.NoError(t, s.dev.Memset(p, 0x77, 0))
	assert.Equal(t, want, s.read(t, p, n), "Memset of zero bytes changed memory")

	// Memset is ordered before a following copy to the same bytes, and
	// after a preceding one.
	require.NoError(t, s.dev.CopyToDevice(p, pattern(n, 9)))
	require.NoError(t, s.dev.Memset(p, 0, n/2))
	got := s.read(t, p, n)
	assert.Equal(t, make([]byte, n/2), got[:n/2])
	assert.Equal(t, pattern(n, 9)[n/2:], got[n/2:])
}

func testMemInfo(t *testing.T, s *suite) {
	free0, total0, err := s.dev.MemInfo()
	require.NoError(t, err)
	require.Positive(t, total0, "total")
	require.GreaterOrEqual(t, total0, s.cfg.capacity, "total below the capacity asked for")
	require.LessOrEqual(t, free0, total0, "free above total")
	require.GreaterOrEqual(t, free0, s.cfg.capacity, "free below the capacity asked for")

	n := s.cfg.capacity / 2
	p := s.alloc(t, n)
	free1, total1, err := s.dev.MemInfo()
	require.NoError(t, err)
	assert.Equal(t, total0, total1, "total changed after Alloc")
	assert.LessOrEqual(t, free1, free0-n, "free bytes did not drop by the %d allocated", n)

	s.free(t, p, n)
	free2, total2, err := s.dev.MemInfo()
	require.NoError(t, err)
	assert.Equal(t, total0, total2, "total changed after Free")
	assert.GreaterOrEqual(t, free2, free1+n, "free bytes did not rise by the %d freed", n)
}

func testOutOfMemory(t *testing.T, s *suite) {
	free0, total, err := s.dev.MemInfo()
	require.NoError(t, err)

	_, err = s.dev.Alloc(total + 1)
	s.requireError(t, err, tensor.ErrOutOfMemory, fmt.Sprintf("Alloc(total+1 = %d)", total+1))

	// A failed allocation takes nothing, and the device still works.
	free1, _, err := s.dev.MemInfo()
	require.NoError(t, err)
	assert.Equal(t, free0, free1, "a refused Alloc changed free bytes")
	p := s.alloc(t, 4096)
	s.free(t, p, 4096)
}

func testInvalidSize(t *testing.T, s *suite) {
	for _, n := range []int64{0, -1, -1 << 40} {
		_, err := s.dev.Alloc(n)
		s.requireError(t, err, tensor.ErrInvalidSize, fmt.Sprintf("Alloc(%d)", n))
	}
	p := s.alloc(t, 64)
	defer s.free(t, p, 64)
	s.requireError(t, s.dev.Memset(p, 0, -1), tensor.ErrInvalidSize, "Memset(p, 0, -1)")
}

func testInvalidPointer(t *testing.T, s *suite) {
	if !s.cfg.pointerChecks {
		t.Skip("device cannot tell its pointers from others (WithoutPointerChecks)")
	}
	const n = 512
	p := s.alloc(t, n)

	s.requireError(t, s.dev.Free(0, n), tensor.ErrInvalidPointer, "Free(0)")
	s.requireError(t, s.dev.Free(p.Add(8), n), tensor.ErrInvalidPointer, "Free(p+8): not the start of a block")
	s.requireError(t, s.dev.Free(p, n+1), tensor.ErrSizeMismatch, "Free(p, wrong size)")

	// The refused calls left the block alone.
	require.NoError(t, s.dev.CopyToDevice(p, pattern(n, 4)))
	assert.Equal(t, pattern(n, 4), s.read(t, p, n))
	s.free(t, p, n)

	// Freed means gone: a second Free and any use are refused.
	s.requireError(t, s.dev.Free(p, n), tensor.ErrInvalidPointer, "second Free(p)")
	s.requireError(t, s.dev.CopyToDevice(p, make([]byte, 8)), tensor.ErrInvalidPointer, "CopyToDevice to a freed block")
	s.requireError(t, s.dev.CopyToHost(make([]byte, 8), p), tensor.ErrInvalidPointer, "CopyToHost from a freed block")
	s.requireError(t, s.dev.Memset(p, 0, 8), tensor.ErrInvalidPointer, "Memset of a freed block")
	s.requireError(t, s.dev.CopyToDevice(0, make([]byte, 8)), tensor.ErrInvalidPointer, "CopyToDevice to 0")
}

func testCopyOutOfRange(t *testing.T, s *suite) {
	if !s.cfg.pointerChecks {
		t.Skip("device cannot tell its pointers from others (WithoutPointerChecks)")
	}
	const n = 1024
	p := s.alloc(t, n)
	defer s.free(t, p, n)
	require.NoError(t, s.dev.CopyToDevice(p, pattern(n, 5)))

	cases := []struct {
		name string
		call func() error
	}{
		{"CopyToDevice past the end", func() error { return s.dev.CopyToDevice(p, make([]byte, n+1)) }},
		{"CopyToDevice from p+n-4", func() error { return s.dev.CopyToDevice(p.Add(n-4), make([]byte, 8)) }},
		{"CopyToHost past the end", func() error { return s.dev.CopyToHost(make([]byte, n+1), p) }},
		{"CopyToHost from p+n-4", func() error { return s.dev.CopyToHost(make([]byte, 8), p.Add(n-4)) }},
		{"Memset past the end", func() error { return s.dev.Memset(p.Add(1), 0, n) }},
	}
	for _, tc := range cases {
		s.requireError(t, tc.call(), tensor.ErrSizeMismatch, tc.name)
	}
	// Nothing was written by the refused calls.
	assert.Equal(t, pattern(n, 5), s.read(t, p, n), "a refused call wrote to the block")
}

// testConcurrent has goroutines allocate, fill, check and free blocks of
// their own while another reads MemInfo, to catch races (with -race), lost
// updates to the device's bookkeeping and blocks handed out twice.
func testConcurrent(t *testing.T, s *suite) {
	const workers, rounds = 8, 40
	maxBlock := s.cfg.capacity / (16 * workers)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var infoWG sync.WaitGroup
	infoWG.Add(1)
	go func() {
		defer infoWG.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			free, total, err := s.dev.MemInfo()
			if !assert.NoError(t, err) || !assert.LessOrEqual(t, free, total) {
				return
			}
		}
	}()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				n := 1 + int64(w*rounds+r)*7919%maxBlock
				seed := byte(w*rounds + r)
				if !concurrentRound(t, s, n, seed) {
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	infoWG.Wait()
}

// concurrentRound runs one worker round; it reports false after a failure.
// It uses assert, not require: require must not be called off the test's
// goroutine.
func concurrentRound(t *testing.T, s *suite, n int64, seed byte) bool {
	p, err := s.dev.Alloc(n)
	if !assert.NoError(t, err, "Alloc(%d)", n) {
		return false
	}
	want := pattern(n, seed)
	ok := assert.NoError(t, s.dev.CopyToDevice(p, want))
	if ok && n > 2 {
		ok = assert.NoError(t, s.dev.Memset(p.Add(1), seed, 1))
		want[1] = seed
	}
	got := make([]byte, n)
	ok = ok && assert.NoError(t, s.dev.CopyToHost(got, p))
	ok = ok && assert.True(t, bytes.Equal(want, got), "block of %d bytes (seed %d) holds another goroutine's bytes", n, seed)
	return assert.NoError(t, s.dev.Free(p, n)) && ok
}
