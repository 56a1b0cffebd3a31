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
// is a leak too, reported as "dropped without Free" with its allocation site
// and stack, whenever the check sees the collector find it:
//
//   - Context watches the tracker from the scope's creation to its check,
//     so every dropped tensor of the scope is reported, even one the
//     tracker reclaimed long before the test ended;
//   - VerifyTestMain watches while the tests run and during its check;
//   - VerifyNone and Find watch during their check, which runs the
//     collector while it settles.
//
// A tensor keeps the lines of its dropped handles until it is released, so
// a dropped View or Retain is named at the line that made it whenever the
// collector found it. A tracker with track.ReclaimLeaks(false) keeps a
// dropped tensor in its live set, flagged, so every check reports it
// whenever it was found; that is the setting to use for test trackers. On a
// tracker that reclaims leaked tensors (the default), a tensor whose last
// handle was found and reclaimed before a VerifyNone or Find began has left
// the tracker and is not seen: the OnLeak callback has reported it, and
// Context is the way to fail the test for it.
//
// A check lists at most 1000 tensors found dropped while it watched and
// counts the rest (LeakError.MoreDropped), so a test that drops handles in
// a loop cannot make its own check run out of memory.
//
// # What still holds it
//
// For the commonest leak, a tensor kept in a container that never lets go,
// the line to change is where the reference is kept. With the Retainers
// option, or TENSORLIFE_RETAINERS=1 in the environment (for CI), a check
// that fails writes a heap dump of the test process and names, under each
// leaked tensor still reachable, the shortest chain of references from a
// root:
//
//	tensor 12: bool[1 77], 77 B, kind mask, device host, age 3ms
//	  kept alive by: package var main.maskCache["prompt-17"]   (map[string]*tensor.Tensor)
//
// The root is a package variable (with the field, index and map key path),
// a goroutine (its state, its creator, the frame and the local), a
// closure's captured variable, or a finalizer. Names come from the test
// binary's symbol table and DWARF, which `go test` strips: run
//
//	TENSORLIFE_RETAINERS=1 go test -ldflags='-s=false -w=false' ./...
//
// or the report names only goroutines, frames and closures, and says so.
// The search is for tests only and bounded; it holds tensorlife's own
// device calls off while the dump is written, and refuses to dump, saying
// why, while goroutines are in system calls or cgo calls, one of which
// returning during the dump can crash the process on Go 1.26. Retainers
// says more.
//
// # Options
//
// IgnoreCurrent ignores tensors recorded before the option was made;
// IgnoreSite, IgnoreKind and IgnoreLabel ignore tensors by stack function,
// kind or label; MaxRetries and MaxSettle bound the settling; Retainers
// names what keeps each leak alive. Context takes ScopeOptions, every
// option but IgnoreCurrent, so that misplacing that one does not compile;
// an invalid value fails the test with an error matching
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
