package pprofexport_test

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"

	"github.com/google/pprof/profile"
	"github.com/tensorlife/tensorlife/pprofexport"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// exampleAllocator returns an allocator on a 1 MiB host device that records
// in tr.
func exampleAllocator(tr *track.Tracker) *tensor.DeviceAllocator {
	dev, err := tensor.NewHostDevice(1 << 20)
	if err != nil {
		panic(err)
	}
	alloc, err := tensor.NewDeviceAllocator(dev, tr)
	if err != nil {
		panic(err)
	}
	return alloc
}

func Example() {
	tr, err := track.New(track.Name("agent"))
	if err != nil {
		panic(err)
	}
	alloc := exampleAllocator(tr)

	// The leak: a mask per generation step, kept in a cache forever.
	ctx := track.WithLabels(context.Background(), "request", "r-1")
	var cache []*tensor.Tensor
	for range 3 {
		mask, err := tensor.New(ctx, alloc, tensor.Bool, 64, 64)
		if err != nil {
			panic(err)
		}
		cache = append(cache, mask)
	}

	snap, err := tr.SnapshotOf(track.Filter{})
	if err != nil {
		panic(err)
	}
	p, err := pprofexport.Profile(snap)
	if err != nil {
		panic(err)
	}
	for _, s := range p.Sample {
		const inuseObjects, inuseSpace = 2, 3
		if s.Value[inuseSpace] == 0 {
			continue // the per-site sample of cumulative allocations
		}
		fmt.Printf("%s: %d tensors, %d bytes, request=%s shape=%s\n", s.Location[0].Line[0].Function.Name,
			s.Value[inuseObjects], s.Value[inuseSpace], s.Label["request"][0], s.Label["shape"][0])
	}
	// pprofexport.WriteFile("tensors.pb.gz", snap) writes the same profile
	// for go tool pprof -top tensors.pb.gz.

	for _, t := range cache {
		if err := t.Free(); err != nil {
			panic(err)
		}
	}
	// Output:
	// github.com/tensorlife/tensorlife/pprofexport_test.Example: 3 tensors, 12288 bytes, request=r-1 shape=[64 64]
}

func ExampleNewHandler() {
	tr, err := track.New()
	if err != nil {
		panic(err)
	}
	ctx := track.WithLabels(context.Background(), "request", "r-7", "model", "m1")
	mask, err := tensor.Make(ctx, exampleAllocator(tr),
		tensor.Spec{DType: tensor.Bool, Shape: tensor.Shape{64, 64}, Kind: "mask"})
	if err != nil {
		panic(err)
	}
	defer mask.Free()

	// Mount it yourself, on the debug listener next to net/http/pprof. The
	// profile shows the request labels listed here and no other.
	h, err := pprofexport.NewHandler(tr, pprofexport.LabelKeys("model"))
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/debug/pprof/tensors", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for _, query := range []string{"", "?kind=kv-cache", "?min_age=forever", "?seconds=3600"} {
		resp, err := http.Get(srv.URL + "/debug/pprof/tensors" + query)
		if err != nil {
			panic(err)
		}
		if resp.StatusCode != http.StatusOK {
			msg, _ := io.ReadAll(resp.Body)
			fmt.Printf("%q: %s: %s", query, resp.Status, msg)
			resp.Body.Close()
			continue
		}
		p, err := profile.Parse(resp.Body)
		resp.Body.Close()
		if err != nil {
			panic(err)
		}
		var inuse int64
		var keys []string
		for _, s := range p.Sample {
			inuse += s.Value[3]
			if s.Value[3] != 0 {
				keys = slices.Sorted(maps.Keys(s.Label))
			}
		}
		fmt.Printf("%q: %s: %d bytes in use, labels %v\n", query, resp.Status, inuse, keys)
	}
	// Output:
	// "": 200 OK: 4096 bytes in use, labels [device dtype kind model shape]
	// "?kind=kv-cache": 200 OK: 0 bytes in use, labels []
	// "?min_age=forever": 400 Bad Request: pprofexport: invalid value for "min_age": "forever", want a duration such as 30s or 5m
	// "?seconds=3600": 400 Bad Request: pprofexport: "seconds"=3600 is longer than this endpoint's longest delta window, 300 seconds (MaxDeltaWindow)
}

func ExampleWriteFile() {
	tr, err := track.New()
	if err != nil {
		panic(err)
	}
	kv, err := tensor.Make(context.Background(), exampleAllocator(tr),
		tensor.Spec{DType: tensor.Float32, Shape: tensor.Shape{8, 128}, Kind: "kv-cache"})
	if err != nil {
		panic(err)
	}
	defer kv.Free()

	dir, err := os.MkdirTemp("", "tensors")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "tensors.pb.gz")

	snap, err := tr.SnapshotOf(track.Filter{Kind: "kv-cache"})
	if err != nil {
		panic(err)
	}
	// Complete or absent, never torn: written aside, then renamed.
	if err := pprofexport.WriteFile(path, snap); err != nil {
		panic(err)
	}
	f, err := os.Open(path)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		panic(err)
	}
	fmt.Println(p.DefaultSampleType, len(p.Sample), "samples")
	// Output:
	// inuse_space 2 samples
}

// Each family of functions takes its own option type, so one list of
// options per use is checked by the compiler. KeepLibraryFrames and
// LabelKeys are FormatOptions, taken everywhere; MinAge and Outlived are
// AgeOptions, taken by the writers of one snapshot and by the handler but
// not by a diff; Filter and the delta limits are the handler's alone.
// Filter in a writer's list, or MinAge in a diff's, does not compile.
func ExampleFormatOption() {
	tr, err := track.New()
	if err != nil {
		panic(err)
	}
	before := tr.Snapshot()
	ctx := track.WithLabels(context.Background(), "request", "r-1", "model", "m1")
	t, err := tensor.New(ctx, exampleAllocator(tr), tensor.Bool, 64)
	if err != nil {
		panic(err)
	}
	defer t.Free()

	labels := pprofexport.LabelKeys("model") // no request ids in what is shared
	fileOpts := []pprofexport.ProfileOption{labels, pprofexport.MinAge(0)}
	diffOpts := []pprofexport.DiffOption{labels}
	handlerOpts := []pprofexport.HandlerOption{labels, pprofexport.MaxConcurrentDeltas(1)}

	live, err := pprofexport.Profile(tr.Snapshot(), fileOpts...)
	if err != nil {
		panic(err)
	}
	diff, err := pprofexport.DiffProfile(before, tr.Snapshot(), diffOpts...)
	if err != nil {
		panic(err)
	}
	h, err := pprofexport.NewHandler(tr, handlerOpts...)
	if err != nil {
		panic(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/tensors", nil))

	requestLabels := func(p *profile.Profile) []string {
		var keys []string
		for _, s := range p.Sample {
			for k := range s.Label {
				if k == "request" || k == "model" {
					keys = append(keys, k+"="+s.Label[k][0])
				}
			}
		}
		return keys
	}
	fmt.Println("file:", requestLabels(live), "diff:", requestLabels(diff), "handler:", rec.Code)
	// Output:
	// file: [model=m1] diff: [model=m1] handler: 200
}
