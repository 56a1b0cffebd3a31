// Package leaky holds tests that leak tensors on purpose, the four ways a
// service keeps one alive, for track/tracktest's retainer tests: they build
// this package's test binary, with and without symbols, run it with
// TENSORLIFE_RETAINERS=1, and read the failing reports. It is under
// testdata, so `go test ./...` never runs it.
package leaky

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

// The containers that never let go.
var (
	maskCache = map[string]*tensor.Tensor{}
	server    = &registry{}
	hooks     []func() int64
	stop      = make(chan struct{})
)

type session struct {
	id    string
	masks []*tensor.Tensor
}

type registry struct {
	sessions []*session
}

func setup(t *testing.T) (*track.Tracker, tensor.Allocator) {
	t.Helper()
	tr, err := track.New(track.Name(t.Name()))
	if err != nil {
		t.Fatal(err)
	}
	dev, err := tensor.NewHostDevice(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	alloc, err := tensor.NewDeviceAllocator(dev, tr)
	if err != nil {
		t.Fatal(err)
	}
	return tr, alloc
}

//go:noinline
func buildMask(t *testing.T, alloc tensor.Allocator, n int) *tensor.Tensor {
	m, err := tensor.Make(context.Background(), alloc, tensor.Spec{DType: tensor.Bool, Shape: tensor.Shape{1, n}, Kind: "mask"})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestLeakInPackageMap(t *testing.T) {
	tr, alloc := setup(t)
	defer tracktest.VerifyNone(t, tr, tracktest.MaxRetries(0))
	maskCache["prompt-17"] = buildMask(t, alloc, 77)
}

func TestLeakInSliceField(t *testing.T) {
	tr, alloc := setup(t)
	defer tracktest.VerifyNone(t, tr, tracktest.MaxRetries(0))
	for i := range 3 {
		s := &session{id: "s"}
		for range 3 {
			s.masks = append(s.masks, buildMask(t, alloc, 8))
		}
		server.sessions = append(server.sessions, s)
		if i != 1 {
			for _, m := range s.masks {
				_ = m.Free()
			}
			s.masks = nil
		}
	}
	server.sessions[1].masks[0].Free()
	server.sessions[1].masks[1].Free()
}

//go:noinline
func onDone(m *tensor.Tensor) func() int64 { return func() int64 { return m.Bytes() } }

func TestLeakInClosure(t *testing.T) {
	tr, alloc := setup(t)
	defer tracktest.VerifyNone(t, tr, tracktest.MaxRetries(0))
	hooks = append(hooks, onDone(buildMask(t, alloc, 16)))
}

// worker keeps its tensor in a local while it waits for a stop that never
// comes.
func worker(t *testing.T, alloc tensor.Allocator, ready chan<- struct{}) {
	scratch := buildMask(t, alloc, 32)
	close(ready)
	<-stop
	_ = scratch.Free()
}

func TestLeakInBlockedGoroutine(t *testing.T) {
	tr, alloc := setup(t)
	defer tracktest.VerifyNone(t, tr, tracktest.MaxRetries(0))
	ready := make(chan struct{})
	go worker(t, alloc, ready)
	<-ready
}

// TestLeakMadeBeforeRetainers runs without TENSORLIFE_RETAINERS: the tensor
// is made before the option turns the search on, so it cannot be found.
func TestLeakMadeBeforeRetainers(t *testing.T) {
	tr, alloc := setup(t)
	maskCache["early"] = buildMask(t, alloc, 4)
	tracktest.VerifyNone(t, tr, tracktest.MaxRetries(0), tracktest.Retainers())
}

// TestLeakBesideBusySyscalls checks while goroutines loop on system calls:
// the search refuses to dump, which would risk the process, and says so.
func TestLeakBesideBusySyscalls(t *testing.T) {
	retainers := tracktest.Retainers() // before the tensor is made
	tr, alloc := setup(t)
	fd, err := syscall.Open("/dev/zero", syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	var done atomic.Bool
	var reads atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			var b [1]byte
			for !done.Load() {
				_, _ = syscall.Read(fd, b[:])
				reads.Add(1)
			}
		})
	}
	for reads.Load() < 10_000 { // the loops are running, not only started
		runtime.Gosched()
	}
	defer func() {
		done.Store(true)
		wg.Wait()
		_ = syscall.Close(fd)
	}()
	maskCache["busy"] = buildMask(t, alloc, 4)
	tracktest.VerifyNone(t, tr, tracktest.MaxRetries(0), retainers)
}
