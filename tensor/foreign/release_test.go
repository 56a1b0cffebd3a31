package foreign_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/foreign"
	"github.com/tensorlife/tensorlife/track"
)

// helperEnv makes the test binary run one of the helper programs below
// instead of the tests: a crash there is a failed child, not a dead test
// binary.
const helperEnv = "FOREIGN_TEST_HELPER"

func TestMain(m *testing.M) {
	if name := os.Getenv(helperEnv); name != "" {
		os.Exit(runHelper(name))
	}
	os.Exit(m.Run())
}

func runHelper(name string) int {
	switch name {
	case "drop-panicking-release":
		return dropPanickingRelease(os.Stdout)
	}
	fmt.Fprintln(os.Stderr, "unknown helper", name)
	return 3
}

// dropPanickingRelease drops two adopted tensors whose Release panics, one
// tracked and one untracked, and waits until the garbage collector has had
// both released. Before releases were run off the finalizer goroutine,
// the first panic killed the process with status 2.
func dropPanickingRelease(out io.Writer) int {
	dev, err := tensor.NewHostDevice(1 << 20)
	if err != nil {
		fmt.Fprintln(out, err)
		return 3
	}
	tr, err := track.New(track.OnLeak(func(track.LeakReport) {}))
	if err != nil {
		fmt.Fprintln(out, err)
		return 3
	}
	var called atomic.Int32
	for i, tracker := range []*track.Tracker{tr, nil} {
		mem := foreign.Memory{Device: dev, Ptr: tensor.DevicePtr(1+i) << 20, Bytes: 64,
			Release: func(tensor.DevicePtr) error {
				called.Add(1)
				panic("library bug")
			}}
		if err := dropAdoption(tracker, mem); err != nil {
			fmt.Fprintln(out, err)
			return 3
		}
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		collect()
		if st := foreign.Adoptions(tr); called.Load() == 2 && len(st) == 1 && st[0].Panicked == 1 {
			collect() // give a late panic every chance to kill the process
			collect()
			fmt.Fprintf(out, "survived: %v\n", st[0].LastDroppedErr)
			return 0
		}
		runtime.Gosched() // a release runs on the release queue's goroutine
	}
	fmt.Fprintf(out, "releases never ran: %d called\n", called.Load())
	return 4
}

//go:noinline
func dropAdoption(tr *track.Tracker, mem foreign.Memory) error {
	_, err := foreign.Adopt(context.Background(), tr, mem, tensor.Spec{DType: tensor.Uint8, Shape: tensor.Shape{int(mem.Bytes)}})
	return err
}

func TestPanickingReleaseOfADroppedTensorDoesNotKillTheProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a child process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=drop-panicking-release")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the child died:\n%s", out)
	assert.Contains(t, string(out), "survived: tensor: host release adopted of 64 B: foreign: Memory.Release panicked: library bug")
}

func TestPanickingReleaseDoesNotEscapeFree(t *testing.T) {
	dev, tr, _ := setup(t, 1<<20)
	mem, releases := foreignBuffer(t, dev, 1024)
	bug := errors.New("library bug")
	release := mem.Release
	mem.Release = func(p tensor.DevicePtr) error {
		_ = release(p) // the library gave the memory back, then fell over
		panic(bug)
	}
	x, err := adoptHere(context.Background(), tr, mem)
	require.NoError(t, err)

	err = x.Free()
	require.Error(t, err)
	assert.ErrorIs(t, err, foreign.ErrPanic)
	assert.ErrorIs(t, err, bug, "a panic with an error unwraps to it")
	var de *tensor.DeviceError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, "release adopted", de.Op)
	var pe *foreign.PanicError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, bug, pe.Value)
	assert.Contains(t, pe.Stack, "release_test.go", "the stack names the panicking function")

	assert.Equal(t, int32(1), releases.Load())
	assert.Zero(t, tr.ReservedOn("host"), "the memory left the books")
	st := foreign.Adoptions(tr)
	require.Len(t, st, 1)
	assert.Equal(t, int64(1), st[0].Panicked)
	assert.Zero(t, st[0].Failed)
	assert.Equal(t, int64(1), st[0].Frees)
	assert.Zero(t, st[0].Blocks)
	assert.NoError(t, st[0].LastDroppedErr, "Free handed the error to its caller")

	// The memory is no longer adopted: the same pointer may be adopted again.
	again := foreign.Memory{Device: dev, Ptr: mem.Ptr, Bytes: 1024, Release: func(tensor.DevicePtr) error { return nil }}
	y, err := adoptHere(context.Background(), tr, again)
	require.NoError(t, err)
	require.NoError(t, y.Free())
}

func TestFailingReleaseIsCountedAndLeavesTheBooks(t *testing.T) {
	dev, tr, _ := setup(t, 1<<20)
	refused := errors.New("library refused")
	x, err := adoptHere(context.Background(), tr, foreign.Memory{Device: dev, Ptr: 1 << 20, Bytes: 1024,
		Release: func(tensor.DevicePtr) error { return refused }})
	require.NoError(t, err)
	require.ErrorIs(t, x.Free(), refused)
	assert.Zero(t, tr.ReservedOn("host"))
	st := foreign.Adoptions(tr)
	require.Len(t, st, 1)
	assert.Equal(t, int64(1), st[0].Failed)
	assert.Zero(t, st[0].Panicked)
}

// TestBlockingReleaseDoesNotStallLeakReports drops an adopted tensor whose
// Release blocks, then twenty tensors of the device allocator and a second
// adopted tensor: every leak report arrives and the second adoption is
// released while the first Release still blocks.
func TestBlockingReleaseDoesNotStallLeakReports(t *testing.T) {
	reports := make(chan track.LeakReport, 64)
	dev, tr, alloc := setupUnchecked(t, 1<<20, track.OnLeak(func(l track.LeakReport) { reports <- l }))
	unblock := make(chan struct{})
	blocked := make(chan struct{})
	var unblockOnce atomic.Bool
	t.Cleanup(func() {
		if unblockOnce.CompareAndSwap(false, true) {
			close(unblock)
		}
	})
	require.NoError(t, dropAdoption(tr, foreign.Memory{Device: dev, Ptr: 1 << 20, Bytes: 64,
		Release: func(tensor.DevicePtr) error {
			close(blocked)
			<-unblock
			return nil
		}}))
	awaitLeak(t, reports)
	select {
	case <-blocked:
	case <-time.After(5 * time.Second):
		t.Fatal("the blocking Release never started")
	}

	for range 20 {
		dropTensor(t, alloc)
	}
	var second atomic.Int32
	require.NoError(t, dropAdoption(tr, foreign.Memory{Device: dev, Ptr: 2 << 20, Bytes: 64,
		Release: func(tensor.DevicePtr) error { second.Add(1); return nil }}))
	for i := range 21 {
		got := awaitLeak(t, reports)
		require.NotNil(t, got.Site, "report %d", i)
	}
	require.Eventually(t, func() bool { return second.Load() == 1 }, 5*time.Second, time.Millisecond,
		"a second dropped adoption is released while the first Release blocks")
	st := foreign.Adoptions(tr)
	require.Len(t, st, 1)
	assert.Equal(t, int64(1), st[0].Pending, "the blocked Release is still pending")
	assert.Zero(t, st[0].Reserved, "a Release that has started took the memory off the books")

	unblockOnce.Store(true)
	close(unblock)
	foreign.WaitReleases()
	st = foreign.Adoptions(tr)
	assert.Zero(t, st[0].Pending)
	assert.Zero(t, st[0].Reserved)
	assert.Zero(t, alloc.Stats().Reserved)
}

//go:noinline
func dropTensor(t *testing.T, alloc tensor.Allocator) {
	_, err := tensor.New(context.Background(), alloc, tensor.Uint8, 16)
	require.NoError(t, err)
}

// A Release that ends its goroutine (runtime.Goexit) takes a releaser with
// it; the queue still drains.
func TestReleaseCallingGoexitDoesNotStopTheQueue(t *testing.T) {
	reports := make(chan track.LeakReport, 8)
	dev, tr, _ := setupUnchecked(t, 1<<20, track.OnLeak(func(l track.LeakReport) { reports <- l }))
	var exited, released atomic.Int32
	require.NoError(t, dropAdoption(tr, foreign.Memory{Device: dev, Ptr: 1 << 20, Bytes: 64,
		Release: func(tensor.DevicePtr) error { exited.Add(1); runtime.Goexit(); return nil }}))
	awaitLeak(t, reports)
	foreign.WaitReleases()
	require.Equal(t, int32(1), exited.Load())
	require.NoError(t, dropAdoption(tr, foreign.Memory{Device: dev, Ptr: 2 << 20, Bytes: 64,
		Release: func(tensor.DevicePtr) error { released.Add(1); return nil }}))
	awaitLeak(t, reports)
	foreign.WaitReleases()
	require.Equal(t, int32(1), released.Load())
	assert.Zero(t, foreign.Adoptions(tr)[0].Pending)
	assert.Zero(t, tr.ReservedOn("host"))
}
