// Package tracktest fails a test that leaves tensors alive. It reads the
// live set of a track.Tracker, so it sees every tensor made through an
// allocator that records in that tracker, on any device.
//
// # One line in a test
//
//	func TestHandler(t *testing.T) {
//		tr, _ := track.New()
//		defer tracktest.VerifyNone(t, tr)
//		...
//	}
//
// VerifyNone fails the test when tensors are still live in tr, listing each
// one (id, dtype, shape, bytes, kind, device, age, labels) grouped by the line
// that allocated it, with that line's full stack. Before it fails, it lets
// pending frees settle: it runs the garbage collector and looks again a few
// times with a short backoff (MaxRetries, MaxSettle), so a tensor freed by a
// goroutine that is just finishing does not fail the test.
//
// # One line in TestMain
//
//	func TestMain(m *testing.M) {
//		tracktest.VerifyTestMain(m, nil) // nil: track.Default()
//	}
//
// VerifyTestMain runs the tests and, when they pass, makes the same check on
// the tracker; on leaks it prints the report to stderr and exits with status
// 1. It is the one function in this package that exits the process.
//
// # Parallel tests: per-test scopes
//
// A check over a whole tracker cannot run beside t.Parallel tests that share
// the tracker: it would see their tensors and blame whichever test checked
// first. Context scopes the check to one test instead:
//
//	func TestDecode(t *testing.T) {
//		t.Parallel()
//		ctx := tracktest.Context(t, tr)
//		out, err := model.Decode(ctx, input) // tensors made under ctx are tagged
//		...
//	}
//
// Every tensor made under the returned context (or a context derived from
// it) carries the label ScopeLabel="<test name>#<n>", and at the test's
// cleanup only tensors carrying that label are checked. Parallel tests each
// get their own scope and never see each other's tensors. The label is an
// ordinary request label, so it also shows in profiles and in the reports
// of the tracker's OnLeak callback. Tensors made under a context that does
// not descend from the scope's (context.Background(), say) are outside the
// scope.
//
// # Tensors dropped without Free
//
// A tensor handle that becomes unreachable before Free is found by the
// garbage collector and reported by its tracker (track.OnLeak). Such a tensor
// is a leak too, and the check reports it as "dropped without Free" when:
//
//   - the tracker keeps leaked tensors live (track.ReclaimLeaks(false)): the
//     tensor stays in the live set, flagged, and is reported exactly. This is
//     the setting to use for test trackers;
//   - or the collector finds the handle while the check settles: the check
//     sees the tensor live, then sees it reclaimed while the site's leak
//     counter rose. Attribution is by site counts; when tensors from one site
//     were both freed and dropped during the same check, each gone tensor of
//     that site is reported as "maybe dropped".
//
// A handle that was reclaimed before the check began has left the live set
// of a reclaiming tracker and cannot be attributed to a check; the tracker's
// OnLeak callback has reported it.
//
// # Options
//
// IgnoreCurrent ignores tensors recorded before the option was made;
// IgnoreSite, IgnoreKind and IgnoreLabel ignore tensors by stack function,
// kind or label; MaxRetries and MaxSettle bound the settling. Options are
// validated where they are passed: an invalid one, or one that cannot apply
// there (IgnoreCurrent with Context), fails the test with an error matching
// ErrInvalidOption rather than being ignored.
//
// # Interfaces
//
// VerifyNone needs only Error from its TestingT, and calls Helper when t has
// it; Context needs Cleanup too (ScopeT). *testing.T, *testing.B, a testify
// suite's T() and small fakes all satisfy them. Find returns the same report
// as an error, for code that is not a test.
//
// Every function in this package is safe to call from parallel tests.
package tracktest
