//go:build cuda

package cuda

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/cu"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/tensortest"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

// These tests need the fake driver (scripts/fakecuda.sh), which CI puts on
// LD_LIBRARY_PATH: they inject driver failures that a real GPU produces only
// by accident, and they skip on a real one (and fail where the fake driver
// is configured but another was loaded). The driver reads its
// configuration once, at cuInit, which gorgonia.org/cu calls before any test
// runs, so each case runs in a child process of this test binary with its
// environment set: TestFakeDriverFaults starts it, TestFakeDriverChild is
// what runs there.

// fakeDevicePrefix starts the name the fake driver gives its devices.
const fakeDevicePrefix = "tensorlife fakecuda"

// requireFakeDriver skips t unless the driver loaded is the fake one, and
// fails it where the environment configures the fake driver and it is not
// the one loaded.
func requireFakeDriver(t *testing.T) {
	t.Helper()
	dev, err := cu.GetDevice(0)
	if err != nil {
		tensortest.NoDevice(t, 0, "no CUDA device: %v", err)
	}
	name, err := dev.Name()
	require.NoError(t, err)
	if !strings.HasPrefix(name, fakeDevicePrefix) {
		tensortest.NotFakeDriver(t, name)
	}
}

// childEnv names the case a child process runs.
const childEnv = "TENSORLIFE_FAKECUDA_TEST_CASE"

// faultCase is one child process: the fake driver's environment, and the
// checks to run there (nil for a process that must not get as far).
type faultCase struct {
	env map[string]string
	run func(t *testing.T)
}

var faultCases = map[string]faultCase{
	"FreeFails": {
		env: map[string]string{"TENSORLIFE_FAKECUDA_FAIL": "cuMemFree:1:CUDA_ERROR_ILLEGAL_ADDRESS"},
		run: childFreeFails,
	},
	"BindFails": {
		env: map[string]string{"TENSORLIFE_FAKECUDA_FAIL": "cuCtxGetCurrent:1:CUDA_ERROR_UNKNOWN"},
		run: childBindFails,
	},
	"DriverOutOfMemory": {
		env: map[string]string{"TENSORLIFE_FAKECUDA_OOM_AFTER": "1M"},
		run: childPoolOutOfMemory,
	},
	"TwoDevices": {
		env: map[string]string{"TENSORLIFE_FAKECUDA_DEVICES": "2", "TENSORLIFE_FAKECUDA_MEMORY": "64M"},
		run: childTwoDevices,
	},
}

// TestFakeDriverChild runs the case childEnv names; it skips in a plain run.
func TestFakeDriverChild(t *testing.T) {
	name := os.Getenv(childEnv)
	if name == "" {
		t.Skip("runs in a child process of TestFakeDriverFaults")
	}
	c, ok := faultCases[name]
	require.True(t, ok, "unknown case %q", name)
	requireFakeDriver(t)
	c.run(t)
}

// runChild runs this test binary's TestFakeDriverChild with env added to a
// copy of the environment without any fake driver settings, and returns its
// output and exit code.
func runChild(t *testing.T, name string, env map[string]string) (string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFakeDriverChild$", "-test.v", "-test.count=1")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TENSORLIFE_FAKECUDA_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, childEnv+"="+name)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(out), exit.ExitCode()
	}
	require.NoError(t, err)
	return string(out), 0
}

func TestFakeDriverFaults(t *testing.T) {
	requireFakeDriver(t)
	for name, c := range faultCases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out, code := runChild(t, name, c.env)
			assert.Zero(t, code, "child failed:\n%s", out)
			assert.Contains(t, out, "--- PASS: TestFakeDriverChild", "child did not run its case:\n%s", out)
		})
	}
}

// gorgonia.org/cu's init exits the process when cuInit fails, before any
// test runs: this is why a binary built with the cuda tag cannot skip its
// tests where there is no GPU (see the package documentation).
func TestFakeDriverInitFailureExits(t *testing.T) {
	requireFakeDriver(t)
	for _, env := range []map[string]string{
		{"TENSORLIFE_FAKECUDA_FAIL": "cuInit:1:CUDA_ERROR_NO_DEVICE"},
		{"TENSORLIFE_FAKECUDA_DEVICES": "0"},
	} {
		out, code := runChild(t, "none", env)
		assert.Equal(t, 1, code, "%v:\n%s", env, out)
		assert.Contains(t, out, "Error in initialization", "%v", env)
		assert.NotContains(t, out, "=== RUN", "%v: no test may run", env)
	}
	// A setting the fake cannot parse fails cuInit too, saying why.
	out, code := runChild(t, "none", map[string]string{"TENSORLIFE_FAKECUDA_FAIL": "cuMemAlloc:0:2"})
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "fakecuda: TENSORLIFE_FAKECUDA_FAIL: bad rule cuMemAlloc:0:2")
}

// A failed cuMemFree leaves the block allocated, as the driver still holds
// it; Close frees it.
func childFreeFails(t *testing.T) {
	d, err := Open(0)
	require.NoError(t, err)
	p, err := d.Alloc(4096)
	require.NoError(t, err)

	err = d.Free(p, 4096)
	de := requireCode(t, err, "CUDA_ERROR_ILLEGAL_ADDRESS")
	assert.Equal(t, 700, de.Code)
	assert.NotErrorIs(t, err, tensor.ErrInvalidPointer, "the pointer was valid")
	assert.Contains(t, err.Error(), "cuda:0 free of 4 KiB")
	blocks, bytes := d.Outstanding()
	assert.Equal(t, 1, blocks)
	assert.Equal(t, int64(4096), bytes)

	require.NoError(t, d.Close(), "Close frees the block the failed Free kept")
}

// When making the context current fails, the call fails with the driver's
// code and leaves nothing behind; the next call works.
func childBindFails(t *testing.T) {
	d, err := Open(0)
	require.NoError(t, err)
	defer func() { require.NoError(t, d.Close()) }()
	free0, _, err := d.MemInfo() // the first cuCtxGetCurrent fails...
	requireCode(t, err, "CUDA_ERROR_UNKNOWN")
	assert.Zero(t, free0)

	p, err := d.Alloc(1 << 20) // ...and only the first
	require.NoError(t, err)
	require.NoError(t, d.Free(p, 1<<20))
}

// The pool on the CUDA device, when the driver runs out of memory: the
// error is an *OOMError that says the device refused and names the line
// holding the memory, and the pool gives back everything on Close.
func childPoolOutOfMemory(t *testing.T) {
	d, err := Open(0)
	require.NoError(t, err)
	tr, err := track.New(track.Name("fake-oom"))
	require.NoError(t, err)
	p, err := pool.New(d, pool.Tracker(tr))
	require.NoError(t, err)

	var held []*tensor.Tensor
	var oomErr error
	for range 64 {
		x, err := holdQuarterMiB(p)
		if err != nil {
			oomErr = err
			break
		}
		held = append(held, x)
	}
	require.ErrorIs(t, oomErr, tensor.ErrOutOfMemory)
	var oom *tensor.OOMError
	require.ErrorAs(t, oomErr, &oom)
	var de *DriverError
	require.ErrorAs(t, oomErr, &de)
	assert.Equal(t, "CUDA_ERROR_OUT_OF_MEMORY", de.Name)
	assert.Contains(t, oomErr.Error(), "holdQuarterMiB")
	assert.Len(t, held, 4, "1 MiB allows four 256 KiB blocks")

	for _, x := range held {
		require.NoError(t, x.Free())
	}
	tracktest.VerifyNone(t, tr)
	require.NoError(t, p.Close())
	blocks, _ := d.Outstanding()
	assert.Zero(t, blocks)
	require.NoError(t, d.Close())
}

//go:noinline
func holdQuarterMiB(p *pool.Pool) (*tensor.Tensor, error) {
	return tensor.New(context.Background(), p, tensor.Uint8, 256<<10)
}

// Each Device makes its own device's context current: memory allocated on
// cuda:1 comes out of cuda:1's memory, never cuda:0's.
func childTwoDevices(t *testing.T) {
	d0, err := Open(0)
	require.NoError(t, err)
	defer func() { require.NoError(t, d0.Close()) }()
	d1, err := Open(1)
	require.NoError(t, err)
	defer func() { require.NoError(t, d1.Close()) }()
	assert.Equal(t, "cuda:1", d1.Name())
	_, err = Open(2)
	require.ErrorIs(t, err, tensor.ErrNoDevice)
	assert.Contains(t, err.Error(), "no CUDA device 2 (2 present)")

	free0, total0, err := d0.MemInfo()
	require.NoError(t, err)
	assert.Equal(t, int64(64<<20), total0)
	p, err := d1.Alloc(8 << 20)
	require.NoError(t, err)
	after0, _, err := d0.MemInfo()
	require.NoError(t, err)
	free1, _, err := d1.MemInfo()
	require.NoError(t, err)
	assert.Equal(t, free0, after0, "cuda:1's allocation came out of cuda:0")
	assert.Equal(t, int64(56<<20), free1)

	// Interleaved from one goroutine, each call binds its own context.
	q, err := d0.Alloc(4 << 20)
	require.NoError(t, err)
	require.NoError(t, d1.Memset(p, 1, 8<<20))
	require.NoError(t, d0.Memset(q, 2, 4<<20))
	require.NoError(t, d1.Free(p, 8<<20))
	require.NoError(t, d0.Free(q, 4<<20))
}

// A thread that still has the primary context current after the last
// holder released it finds it destroyed (the real driver's
// CUDA_ERROR_CONTEXT_IS_DESTROYED for a primary context not initialized);
// a Device opened afterwards brings it back on every thread.
func TestFakeDriverReleasedContext(t *testing.T) {
	requireFakeDriver(t)
	onOwnThread(func() {
		d, err := Open(0)
		require.NoError(t, err)
		p, err := d.Alloc(4096) // leaves the context current on this thread
		require.NoError(t, err)
		require.NoError(t, d.Free(p, 4096))
		require.NoError(t, d.Close())

		_, err = cu.MemAlloc(4096)
		err = driverError("alloc", err)
		requireCode(t, err, "CUDA_ERROR_CONTEXT_IS_DESTROYED")
		assert.ErrorIs(t, err, tensor.ErrNoDevice)

		d, err = Open(0)
		require.NoError(t, err)
		p, err = d.Alloc(4096)
		require.NoError(t, err)
		require.NoError(t, d.Free(p, 4096))
		require.NoError(t, d.Close())
	})
}
