package tensortest_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tensorlife/tensorlife/tensor/tensortest"
)

// endTB records how a helper ended a test instead of ending it.
type endTB struct {
	testing.TB
	skipped, failed string
}

func (e *endTB) Helper()                           {}
func (e *endTB) Skip(args ...any)                  { e.skipped = fmt.Sprint(args...) }
func (e *endTB) Skipf(format string, args ...any)  { e.skipped = fmt.Sprintf(format, args...) }
func (e *endTB) Fatalf(format string, args ...any) { e.failed = fmt.Sprintf(format, args...) }

// A missing device skips a test, unless the environment configured the
// fake driver with it: then the test fails, so that a CI run whose driver
// did not come up cannot pass with its CUDA tests skipped.
func TestNoDevice(t *testing.T) {
	tests := []struct {
		env     string
		ordinal int
		fails   bool
	}{
		{"", 0, false},
		{"0", 0, false},
		{"junk", 0, false},
		{"1", 0, true},
		{"2", 1, true},
		{"2", 2, false},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%q/cuda:%d", tc.env, tc.ordinal), func(t *testing.T) {
			t.Setenv(tensortest.FakeCUDAEnv, tc.env)
			tb := &endTB{TB: t}
			tensortest.NoDevice(tb, tc.ordinal, "no CUDA device: %v", "CUDA_ERROR_NO_DEVICE")
			if tc.fails {
				assert.Empty(t, tb.skipped)
				assert.Contains(t, tb.failed, "no CUDA device: CUDA_ERROR_NO_DEVICE; "+tensortest.FakeCUDAEnv+"="+tc.env)
				assert.Contains(t, tb.failed, fmt.Sprintf("cuda:%d, so it must open", tc.ordinal))
			} else {
				assert.Empty(t, tb.failed)
				assert.Equal(t, "no CUDA device: CUDA_ERROR_NO_DEVICE", tb.skipped)
			}
		})
	}
}

func TestNotFakeDriver(t *testing.T) {
	t.Setenv(tensortest.FakeCUDAEnv, "")
	tb := &endTB{TB: t}
	tensortest.NotFakeDriver(tb, "NVIDIA H200")
	assert.Empty(t, tb.failed)
	assert.Contains(t, tb.skipped, `not on "NVIDIA H200"`, "a real GPU skips")

	t.Setenv(tensortest.FakeCUDAEnv, "2")
	tb = &endTB{TB: t}
	tensortest.NotFakeDriver(tb, "NVIDIA H200")
	assert.Empty(t, tb.skipped)
	assert.Contains(t, tb.failed, `the driver loaded names its device "NVIDIA H200"`, "a configured fake driver must be the one loaded")
}
