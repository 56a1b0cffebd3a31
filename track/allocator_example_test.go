package track_test

import (
	"context"
	"fmt"

	"github.com/tensorlife/tensorlife/track"
)

// buffer is what a minimal allocator hands out: its memory and the record
// that tracks it.
type buffer struct {
	mem []byte
	rec track.Record
}

// allocate records a buffer at its caller's line.
//
//go:noinline
func allocate(ctx context.Context, tr *track.Tracker, n int) (*buffer, error) {
	b := &buffer{mem: make([]byte, n)}
	b.rec.Bytes = int64(n)
	b.rec.Meta = track.InternMeta("scratch", "host", "uint8", []int{n})
	if err := tr.Books().Record(ctx, &b.rec, 1); err != nil { // 1: name allocate's caller
		return nil, err
	}
	return b, nil
}

// An allocator records what it hands out and releases it when the memory
// goes back; the tracker's reports then name the line that asked for it.
func ExampleBooks_Record() {
	tr, _ := track.New(track.Name("example"))
	ctx, end := track.WithRequest(context.Background())
	b, _ := allocate(ctx, tr, 1024)
	end()
	fmt.Println("live:", tr.Totals().LiveBytes, "outlived:", tr.Totals().OutlivedBytes)
	fmt.Println("site:", b.rec.Site().Location().Function)
	_ = b.rec.Release()
	fmt.Println("live:", tr.Totals().LiveBytes)
	// Output:
	// live: 1024 outlived: 1024
	// site: github.com/tensorlife/tensorlife/track_test.ExampleBooks_Record
	// live: 0
}

// shelf is state a package keeps per tracker.
type shelf struct{ opened int }

var shelves = track.NewLocal(func() *shelf { return new(shelf) })

// A package keeps state per tracker in a Local: made on first use, the
// tracker's own, gone with it.
func ExampleLocal() {
	a, _ := track.New()
	b, _ := track.New()
	of := func(tr *track.Tracker) *shelf {
		s, err := shelves.Of(tr)
		if err != nil {
			panic(err) // only a Local made per call gets here
		}
		return s
	}
	of(a).opened++
	of(a).opened++
	of(b).opened++
	fmt.Println(of(a).opened, of(b).opened)
	// Output: 2 1
}
