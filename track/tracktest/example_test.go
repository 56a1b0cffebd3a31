package tracktest_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"strings"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

// exampleT stands for the *testing.T of a test: it prints the first line of
// each failure and runs cleanups when the test ends.
type exampleT struct {
	name     string
	cleanups []func()
}

func (t *exampleT) Error(args ...any) {
	first, _, _ := strings.Cut(fmt.Sprint(args...), "\n")
	// Scope numbers depend on how many scopes the process made before.
	fmt.Println(regexp.MustCompile(`#\d+`).ReplaceAllString(first, "#N"))
}
func (t *exampleT) Cleanup(f func()) { t.cleanups = append(t.cleanups, f) }
func (t *exampleT) Name() string     { return t.name }
func (t *exampleT) end() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}

func ExampleVerifyNone() {
	tr, _ := track.New(track.Name("example"))
	dev, _ := tensor.NewHostDevice(1 << 20)
	alloc, _ := tensor.NewDeviceAllocator(dev, tr)
	t := &exampleT{name: "TestMask"}

	mask, _ := tensor.New(context.Background(), alloc, tensor.Bool, 64, 64)
	tracktest.VerifyNone(t, tr, tracktest.MaxRetries(0)) // the mask is live: the test fails

	_ = mask.Free()
	tracktest.VerifyNone(t, tr) // clean: nothing to say
	fmt.Println("clean")
	// Output:
	// tracktest: 1 tensor leaked (4 KiB) in tracker "example":
	// clean
}

func ExampleContext() {
	tr, _ := track.New(track.Name("shared"))
	dev, _ := tensor.NewHostDevice(1 << 20)
	alloc, _ := tensor.NewDeviceAllocator(dev, tr)

	// Two tests share the tracker, as parallel tests do.
	decode, encode := &exampleT{name: "TestDecode"}, &exampleT{name: "TestEncode"}
	decodeCtx := tracktest.Context(decode, tr, tracktest.MaxRetries(0))
	encodeCtx := tracktest.Context(encode, tr, tracktest.MaxRetries(0))

	logits, _ := tensor.New(decodeCtx, alloc, tensor.Float32, 2, 8) // never freed
	hidden, _ := tensor.New(encodeCtx, alloc, tensor.Float32, 4, 4)
	_ = hidden.Free()

	encode.end() // passes: the decode test's tensor is not in its scope
	decode.end() // fails
	_ = logits.Free()
	// Output:
	// tracktest: 1 tensor leaked (64 B) in tracker "shared", scope tensorlife.test=TestDecode#N:
}

func ExampleContext_droppedHandle() {
	// A tracker that reclaims dropped tensors at once (the default), quiet.
	tr, _ := track.New(track.Name("shared"), track.OnLeak(func(track.LeakReport) {}))
	dev, _ := tensor.NewHostDevice(1 << 20)
	alloc, _ := tensor.NewDeviceAllocator(dev, tr)
	t := &exampleT{name: "TestDrop"}
	ctx := tracktest.Context(t, tr)

	_, _ = tensor.New(ctx, alloc, tensor.Float32, 4) // the handle is dropped without Free
	for tr.Totals().LiveCount > 0 {
		runtime.GC() // the collector finds it and the tracker reclaims it
		runtime.Gosched()
	}

	t.end() // the scope still reports it, with its site
	// Output:
	// tracktest: 1 tensor leaked (16 B) in tracker "shared", scope tensorlife.test=TestDrop#N (1 handle: 0 live, 1 dropped without Free):
}

func ExampleFind() {
	tr, _ := track.New(track.Name("service"))
	dev, _ := tensor.NewHostDevice(1 << 20)
	alloc, _ := tensor.NewDeviceAllocator(dev, tr)
	kv, _ := tensor.Make(context.Background(), alloc, tensor.Spec{DType: tensor.Float16, Shape: tensor.Shape{8, 128}, Kind: "kv-cache"})

	err := tracktest.Find(tr, tracktest.MaxRetries(0))
	var le *tracktest.LeakError
	if errors.As(err, &le) {
		l := le.Leaks[0]
		fmt.Println(errors.Is(err, tracktest.ErrLeaked), l.Kind, l.DType, l.Shape, l.Bytes, l.State)
	}
	fmt.Println(tracktest.Find(tr, tracktest.IgnoreKind("kv-cache")))
	_ = kv.Free()
	// Output:
	// true kv-cache float16 [8 128] 2048 live
	// <nil>
}
