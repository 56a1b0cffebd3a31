package pprofexport_test

import (
	"bufio"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

// This file is the known program the tests profile: an agent loop that
// builds an attention mask per step and keeps it, next to a KV cache. Its
// allocating lines carry markers ("line:mask", "line:kv") that the tests
// look up, so the expected line numbers follow edits to this file.

// maskBytes is the size of one mask: 64x64 bools.
const maskBytes = 64 * 64

// kvBytes is the size of one KV block: 8x128 float32s.
const kvBytes = 8 * 128 * 4

// buildMasks makes n masks, the allocation that leaks in the story.
func buildMasks(ctx context.Context, alloc tensor.Allocator, n int) ([]*tensor.Tensor, error) {
	out := make([]*tensor.Tensor, 0, n)
	for range n {
		m, err := tensor.New(ctx, alloc, tensor.Bool, 64, 64) // line:mask
		if err != nil {
			return out, err
		}
		out = append(out, m)
	}
	return out, nil
}

// buildKV makes n KV-cache blocks.
func buildKV(ctx context.Context, alloc tensor.Allocator, n int) ([]*tensor.Tensor, error) {
	out := make([]*tensor.Tensor, 0, n)
	for range n {
		spec := tensor.Spec{DType: tensor.Float32, Shape: tensor.Shape{8, 128}, Kind: "kv-cache"}
		kv, err := tensor.Make(ctx, alloc, spec) // line:kv
		if err != nil {
			return out, err
		}
		out = append(out, kv)
	}
	return out, nil
}

// program is a tracker, a host device and the tensors a test made; every
// tensor is freed and the device checked empty when the test ends.
type program struct {
	t       testing.TB
	tracker *track.Tracker
	device  *tensor.HostDevice
	alloc   *tensor.DeviceAllocator
	live    []*tensor.Tensor
}

func newProgram(t testing.TB, opts ...track.Option) *program {
	t.Helper()
	opts = append([]track.Option{track.Name("pprofexport-test"), track.OnLeak(func(track.LeakReport) {})}, opts...)
	tr, err := track.New(opts...)
	require.NoError(t, err)
	dev, err := tensor.NewHostDevice(64 << 20)
	require.NoError(t, err)
	alloc, err := tensor.NewDeviceAllocator(dev, tr)
	require.NoError(t, err)
	p := &program{t: t, tracker: tr, device: dev, alloc: alloc}
	t.Cleanup(func() {
		p.freeAll()
		require.Zero(t, dev.Used(), "device memory left after the test")
		tracktest.VerifyNone(t, tr)
	})
	return p
}

// masks makes n masks under request and keeps them.
func (p *program) masks(request string, n int) {
	p.t.Helper()
	ms, err := buildMasks(p.ctx(request), p.alloc, n)
	p.live = append(p.live, ms...)
	require.NoError(p.t, err)
}

// kv makes n KV blocks under request and keeps them.
func (p *program) kv(request string, n int) {
	p.t.Helper()
	ts, err := buildKV(p.ctx(request), p.alloc, n)
	p.live = append(p.live, ts...)
	require.NoError(p.t, err)
}

// churn makes n masks under request and frees them at once: they count as
// allocations, not as live memory.
func (p *program) churn(request string, n int) {
	p.t.Helper()
	ms, err := buildMasks(p.ctx(request), p.alloc, n)
	for _, m := range ms {
		require.NoError(p.t, m.Free())
	}
	require.NoError(p.t, err)
}

func (p *program) ctx(request string) context.Context {
	if request == "" {
		return context.Background()
	}
	return track.WithLabels(context.Background(), "request", request)
}

func (p *program) freeAll() {
	for _, t := range p.live {
		require.NoError(p.t, t.Free())
	}
	p.live = nil
}

// snapshot takes an unfiltered snapshot.
func (p *program) snapshot() *track.Snapshot {
	p.t.Helper()
	s, err := p.tracker.SnapshotOf(track.Filter{})
	require.NoError(p.t, err)
	return s
}

// markerLine returns the line of this file that carries marker.
func markerLine(t testing.TB, marker string) int {
	t.Helper()
	f, err := os.Open("program_test.go")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if strings.HasSuffix(sc.Text(), "// "+marker) {
			return n
		}
	}
	require.NoError(t, sc.Err())
	t.Fatalf("marker %q not found in program_test.go", marker)
	return 0
}
