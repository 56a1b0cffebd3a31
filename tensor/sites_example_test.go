package tensor_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// An allocator's own error names the sites that hold its memory as
// tensorlife's errors do.
func ExampleWriteSites() {
	tr, _ := track.New()
	r := &track.Record{Bytes: 4096, Meta: track.InternMeta("kv-cache", "host", "", nil)}
	_ = tr.Books().Record(context.Background(), r, 0)
	var b strings.Builder
	b.WriteString("myalloc: closed with 1 live block")
	tensor.WriteSites(&b, "live sites", tr.SiteTotals(), nil)
	_ = r.Release()
	text := b.String()
	fmt.Println(strings.Contains(text, "live sites:"), strings.Contains(text, "4 KiB in 1 tensor: "))
	fmt.Println(strings.Contains(text, "tensor_test.ExampleWriteSites"))
	// Output:
	// true true
	// true
}
