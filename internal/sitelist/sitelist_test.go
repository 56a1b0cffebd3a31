package sitelist_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/tensorlife/tensorlife/internal/format"
	"github.com/tensorlife/tensorlife/internal/sitelist"
	"github.com/tensorlife/tensorlife/track"
)

func Example() {
	tr, _ := track.New()
	r := &track.Record{Bytes: 4096, Meta: track.InternMeta("kv-cache", "host", "", nil)}
	_ = tr.Record(context.Background(), r, 0)
	lines := sitelist.Lines(tr.SiteTotals(), nil)
	var b strings.Builder
	format.WriteSites(&b, "top live sites", lines)
	fmt.Println(lines[0].Function, lines[0].Bytes, strings.Contains(b.String(), "4 KiB in 1 tensor"))
	_ = r.Release()
	// Output: github.com/tensorlife/tensorlife/internal/sitelist_test.Example 4096 true
}
