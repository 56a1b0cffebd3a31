package pprofexport_test

import (
	"context"

	"github.com/tensorlife/tensorlife/track"
)

// recordAt records every record of recs from one call stack chosen by path:
// each of depth levels goes through recordLeft or recordRight by one bit of
// path, so 1<<depth paths give as many distinct call sites. Benchmarks and
// the fuzz target use it to make many sites without generated code.
func recordAt(ctx context.Context, tr *track.Tracker, recs []track.Record, path uint, depth int) error {
	if depth == 0 {
		for i := range recs {
			if err := tr.Books().Record(ctx, &recs[i], 0); err != nil {
				return err
			}
		}
		return nil
	}
	if path&1 == 0 {
		return recordLeft(ctx, tr, recs, path>>1, depth-1)
	}
	return recordRight(ctx, tr, recs, path>>1, depth-1)
}

//go:noinline
func recordLeft(ctx context.Context, tr *track.Tracker, recs []track.Record, path uint, depth int) error {
	return recordAt(ctx, tr, recs, path, depth)
}

//go:noinline
func recordRight(ctx context.Context, tr *track.Tracker, recs []track.Record, path uint, depth int) error {
	return recordAt(ctx, tr, recs, path, depth)
}
