package track_test

import (
	"context"
	"fmt"

	"github.com/tensorlife/tensorlife/track"
)

// A writer that handles each group as it reads it (a profile's encoder)
// takes them apart from the snapshot, and holds none of them.
func ExampleBooks_GroupsOf() {
	tr, err := track.New(track.Name("example"))
	if err != nil {
		panic(err)
	}
	var recs []*track.Record
	for _, id := range []string{"r-2", "r-1", "r-2"} {
		ctx := track.WithLabels(context.Background(), "request", id, "model", "llama")
		rec := &track.Record{Bytes: 1024, Meta: track.InternMeta("activation", "host", "float16", []int{512})}
		if err := tr.Books().Record(ctx, rec, 0); err != nil {
			panic(err)
		}
		recs = append(recs, rec)
	}
	snap, groups, err := tr.Books().GroupsOf(track.Filter{LabelKeys: []string{"request"}})
	if err != nil {
		panic(err)
	}
	fmt.Println(groups.Len(), "groups,", snap.Sites[0].LiveBytes, "bytes live")
	for g := range groups.All() {
		fmt.Println(g.Labels, g.Count, g.Bytes)
	}
	for _, rec := range recs {
		if err := rec.Release(); err != nil {
			panic(err)
		}
	}
	// Output:
	// 2 groups, 3072 bytes live
	// {request=r-2} 2 2048
	// {request=r-1} 1 1024
}
