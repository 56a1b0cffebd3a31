package track_test

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
)

// recordOther records from a line of its own whose 64 (Meta, size) slots
// the test fills first, so that what follows is counted in the site's
// other shapes.
//
//go:noinline
func recordOther(tr *track.Tracker, ctx context.Context, bytes int64) *track.Record {
	r := &track.Record{Bytes: bytes, Meta: track.InternMeta("tensor", "host", "uint8", []int{int(bytes % 1024)})}
	if err := tr.Books().Record(ctx, r, 0); err != nil {
		panic(err)
	}
	return r
}

// siteMaker returns a function that makes records with f on a goroutine
// of its own, from one stack: at one site, whoever calls it.
func siteMaker(t *testing.T, f func(ctx context.Context, bytes int64) *track.Record) func(ctx context.Context, bytes int64) *track.Record {
	type ask struct {
		ctx   context.Context
		bytes int64
		out   chan *track.Record
	}
	asks := make(chan ask)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for a := range asks {
			a.out <- f(a.ctx, a.bytes)
		}
	}()
	t.Cleanup(func() { close(asks); <-done })
	return func(ctx context.Context, bytes int64) *track.Record {
		out := make(chan *track.Record)
		asks <- ask{ctx, bytes, out}
		return <-out
	}
}

// exact is a figure as the test expects it: the exact sum, in big.Int,
// held at MaxInt64.
type exact struct{ big.Int }

func (e *exact) add(n int64) { e.Add(&e.Int, big.NewInt(n)) }

func (e *exact) read() int64 {
	if e.Cmp(big.NewInt(math.MaxInt64)) > 0 {
		return math.MaxInt64
	}
	return e.Int64()
}

// wideCase is one mix of records: their sizes, where each is made (0 a
// slot site, 1 another slot site, 2 the other shapes of a full site), and
// whether it is made under the request (else under none: outlived from
// the start).
type wideRec struct {
	bytes   int64
	site    int
	request bool
}

// Every figure the record path sums reads the exact value or MaxInt64,
// never a wrapped or negative one: records near MaxInt64 bytes, alone
// and mixed with small ones and with ones at the size where a site counts
// them apart (2^32), in a site's slots, in its other shapes, at several
// sites, under a request and under none, read after each record is made,
// after the request ends, and after each release, in each order. The
// figures: the tracker's Totals (live, made and outlived bytes, the peak),
// each site's Stats (live, made, outlived) and its row in SiteTotals, the
// default profile's snapshot (read from the counters, as CopyCounts' and
// the out-of-memory error's are) and a filtered one (a walk), the live
// bytes by class, the open request's in-flight bytes and its top site, and
// the request kind's outlived bytes.
func TestRecordPathSumsReadExactOrMaxInt64(t *testing.T) {
	const huge = math.MaxInt64 - 7
	mixes := map[string][]wideRec{
		"five near MaxInt64 at one slot": {{huge, 0, false}, {huge, 0, false}, {huge, 0, true}, {huge, 0, true}, {huge, 0, false}},
		"near MaxInt64 among small ones": {{64, 0, false}, {huge, 0, true}, {1<<32 - 1, 0, true}, {huge - 1, 0, false},
			{1 << 32, 0, true}, {64, 0, true}, {huge, 0, false}, {1 << 40, 0, false}},
		"in the other shapes": {{huge, 2, false}, {huge - 1, 2, true}, {64, 2, true}, {1 << 32, 2, false}, {huge - 2, 2, true},
			{1<<32 - 1, 2, false}, {huge - 3, 2, false}},
		"across sites": {{huge, 0, true}, {huge, 1, false}, {huge, 2, true}, {65, 1, true}, {huge, 0, false},
			{1 << 33, 2, false}, {huge, 1, true}, {63, 0, false}},
	}
	orders := map[string]func(n int) []int{
		"made order": func(n int) []int {
			out := make([]int, n)
			for i := range out {
				out[i] = i
			}
			return out
		},
		"reverse": func(n int) []int {
			out := make([]int, n)
			for i := range out {
				out[i] = n - 1 - i
			}
			return out
		},
		"interleaved": func(n int) []int { // odd ones first, then even ones from the end
			var out []int
			for i := 1; i < n; i += 2 {
				out = append(out, i)
			}
			for i := (n - 1) &^ 1; i >= 0; i -= 2 {
				out = append(out, i)
			}
			return out
		},
	}
	for mixName, mix := range mixes {
		for orderName, order := range orders {
			t.Run(mixName+"/"+orderName, func(t *testing.T) {
				tr := newTracker(t, track.RequestKinds("kind"))
				makers := []func(ctx context.Context, bytes int64) *track.Record{
					func(ctx context.Context, bytes int64) *track.Record { return recordA(tr, ctx, bytes, "tensor") },
					func(ctx context.Context, bytes int64) *track.Record { return recordB(tr, ctx, bytes) },
					func(ctx context.Context, bytes int64) *track.Record { return recordOther(tr, ctx, bytes) },
				}
				make3 := make([]func(ctx context.Context, bytes int64) *track.Record, len(makers))
				for i, f := range makers {
					make3[i] = siteMaker(t, f)
				}
				for i := range 64 { // fill the other-shapes site's slots
					release(t, tr, make3[2](context.Background(), int64(i+1)))
				}
				var madeBefore exact
				madeBefore.add(64 * 65 / 2)

				ctx, end := track.WithRequest(context.Background())
				ctx = track.WithLabels(ctx, "kind", "wide")
				var (
					recs         []*track.Record
					sites        [3]*track.Site
					live, made   exact
					siteLive     [3]exact
					siteMade     [3]exact
					siteOutlived [3]exact
					siteCount    [3]int64
					outlived     exact
					inFlight     exact
					inFlightSite [3]exact
					peak         int64
					ended        bool
					released     = make([]bool, len(mix))
				)
				siteMade[2].Set(&madeBefore.Int)
				made.Set(&madeBefore.Int)
				check := func(step string) {
					t.Helper()
					tot := tr.Totals()
					peak = max(peak, live.read())
					assert.Equal(t, live.read(), tot.LiveBytes, "%s: Totals.LiveBytes", step)
					assert.Equal(t, made.read(), tot.AllocBytes, "%s: Totals.AllocBytes", step)
					assert.Equal(t, outlived.read(), tot.OutlivedBytes, "%s: Totals.OutlivedBytes", step)
					assert.Equal(t, peak, tot.PeakBytes, "%s: Totals.PeakBytes", step)
					counted, err := tr.SnapshotOf(track.Filter{LabelKeys: []string{}})
					require.NoError(t, err)
					walked, err := tr.SnapshotOf(track.Filter{Allocations: true})
					require.NoError(t, err)
					totals := map[*track.Site]track.SiteStats{}
					for _, st := range tr.SiteTotals() {
						totals[st.Site] = st
					}
					for i, s := range sites {
						if s == nil {
							continue
						}
						st := s.Stats()
						what := fmt.Sprintf("%s: site %d", step, i)
						assert.Equal(t, siteLive[i].read(), st.LiveBytes, "%s: LiveBytes", what)
						assert.Equal(t, siteCount[i], st.LiveCount, "%s: LiveCount", what)
						assert.Equal(t, siteMade[i].read(), st.AllocBytes, "%s: AllocBytes", what)
						assert.Equal(t, siteOutlived[i].read(), st.OutlivedBytes, "%s: OutlivedBytes", what)
						assert.Equal(t, st, totals[s], "%s: SiteTotals", what)
						for name, snap := range map[string]*track.Snapshot{"counted": counted, "walked": walked} {
							var got track.SiteStats
							for _, x := range snap.Sites {
								if x.Site == s {
									got = x
								}
							}
							assert.Equal(t, siteLive[i].read(), got.LiveBytes, "%s: %s snapshot's LiveBytes", what, name)
							assert.Equal(t, siteMade[i].read(), got.AllocBytes, "%s: %s snapshot's AllocBytes", what, name)
							var groups exact
							for _, g := range snap.Groups {
								if g.Site == s {
									assert.GreaterOrEqual(t, g.Bytes, int64(0), "%s: %s group", what, name)
									groups.add(g.Bytes)
								}
							}
							if siteLive[i].read() < math.MaxInt64 {
								assert.Equal(t, siteLive[i].read(), groups.read(), "%s: %s groups", what, name)
							}
						}
					}
					var classBytes int64
					for _, c := range tr.Books().LiveByClass() {
						assert.GreaterOrEqual(t, c.LiveBytes, int64(0), "%s: class", step)
						classBytes = max(classBytes, c.LiveBytes)
					}
					if live.read() < math.MaxInt64 { // two classes: tensor and mask
						var sum exact
						for _, c := range tr.Books().LiveByClass() {
							sum.add(c.LiveBytes)
						}
						assert.Equal(t, live.read(), sum.read(), "%s: LiveByClass", step)
					}
					if !ended {
						open := tr.OpenRequests(1)
						assert.Equal(t, inFlight.read(), open.InFlightBytes, "%s: in flight", step)
						if inFlight.Sign() > 0 {
							require.Len(t, open.Largest, 1)
							var top int64
							for i := range inFlightSite {
								top = max(top, inFlightSite[i].read())
							}
							assert.Equal(t, top, open.Largest[0].TopSiteBytes, "%s: the request's top site", step)
						}
					}
				}

				for i, w := range mix {
					c := context.Background()
					if w.request {
						c = ctx
					}
					r := make3[w.site](c, w.bytes)
					recs = append(recs, r)
					sites[w.site] = r.Site()
					live.add(w.bytes)
					made.add(w.bytes)
					siteLive[w.site].add(w.bytes)
					siteMade[w.site].add(w.bytes)
					siteCount[w.site]++
					if w.request {
						inFlight.add(w.bytes)
						inFlightSite[w.site].add(w.bytes)
					} else {
						outlived.add(w.bytes)
						siteOutlived[w.site].add(w.bytes)
					}
					check(fmt.Sprintf("made %d", i))
				}
				end()
				ended = true
				for i, w := range mix {
					if w.request {
						outlived.add(w.bytes)
						siteOutlived[w.site].add(w.bytes)
					}
					_ = i
				}
				check("request ended")
				costs := tr.RequestCosts()
				require.Len(t, costs, 1)
				assert.Equal(t, inFlight.read(), costs[0].OutlivedBytes, "the kind's outlived bytes")

				for _, i := range order(len(mix)) {
					w := mix[i]
					require.False(t, released[i])
					released[i] = true
					release(t, tr, recs[i])
					live.add(-w.bytes)
					siteLive[w.site].add(-w.bytes)
					siteCount[w.site]--
					outlived.add(-w.bytes)
					siteOutlived[w.site].add(-w.bytes)
					check(fmt.Sprintf("released %d", i))
				}
				tot := tr.Totals()
				assert.Zero(t, tot.LiveBytes)
				assert.Zero(t, tot.OutlivedBytes)
			})
		}
	}
}
