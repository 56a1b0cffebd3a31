package tracktest

import (
	"fmt"
	"os"
	"strings"

	"github.com/tensorlife/tensorlife/internal/heapfence"
	"github.com/tensorlife/tensorlife/internal/option"
	"github.com/tensorlife/tensorlife/internal/retainers"
	"github.com/tensorlife/tensorlife/track"
)

// retainersEnv is the environment variable that turns the retainer search
// on for every check of a test binary, as Retainers does for one: for CI.
const retainersEnv = "TENSORLIFE_RETAINERS"

// retainersFromEnv is set, once, from TENSORLIFE_RETAINERS=1.
var retainersFromEnv bool

func init() {
	if os.Getenv(retainersEnv) == "1" {
		// From the start, so that every tensor the tests make can be found.
		heapfence.EnableRetainers()
		retainersFromEnv = true
	}
}

// Retainers makes a check that fails name, under each leaked tensor still
// reachable, the shortest chain of references that keeps it alive: the
// package variable with the field, index and map key path, the goroutine
// (with its state, its creator, the frame and the local variable), a
// closure's captured variable, or a finalizer:
//
//	tensor 12: bool[1 77], 77 B, kind mask, device host, age 3ms
//	  kept alive by: package var main.maskCache["prompt-17"]   (map[string]*tensor.Tensor)
//
// TENSORLIFE_RETAINERS=1 in the environment turns it on for every check of
// the test binary. It is for tests only: the search writes a heap dump of
// the process, which stops the world for tens of milliseconds on a test's
// heap, and it refuses to run outside a test binary.
//
// Only handles made after Retainers was called (or, with the environment
// variable, after the test binary started) can be found: write the option
// where the test starts, as with IgnoreCurrent,
//
//	defer tracktest.VerifyNone(t, tr, tracktest.Retainers())
//
// and from then on package tensor remembers each handle it makes, weakly,
// for the rest of the process.
//
// Names need the test binary's symbol table and DWARF, which `go test`
// leaves out: the report then names what it can (goroutines, frames,
// closures) and says to rerun with go test -ldflags='-s=false -w=false'.
// The search is bounded (32 paths of at most 64 objects, a 1 GiB dump, 10
// s), and refuses, saying so in the report, while goroutines are in system
// calls or cgo calls (it waits up to 250 ms for them first): on Go 1.26 a
// heap dump can crash the process when one returns while it runs. So a
// check beside a goroutine that waits on a child process or a blocking
// read gets no retainers. LeakError.Retainers says how the search went.
func Retainers() ScopeOption {
	heapfence.EnableRetainers()
	return optionFunc(option.Set(true, func(c *config, on bool) { c.retainers = on }))
}

// findRetainers names what keeps each live leak of le alive.
func (c *config) findRetainers(tr *track.Tracker, le *LeakError) {
	type target struct {
		leak int // index in le.Leaks
	}
	var targets []any
	var owners []target
	unregistered := 0
	for i := range le.Leaks {
		l := &le.Leaks[i]
		if l.State != Live {
			continue
		}
		hs := tr.Books().LiveHandles(l.ID)
		if len(hs) == 0 {
			unregistered++
		}
		for _, h := range hs {
			targets = append(targets, h)
			owners = append(owners, target{leak: i})
		}
	}
	var notes []string
	if unregistered > 0 {
		notes = append(notes, fmt.Sprintf("%s made before the search was turned on (or held only by freed "+
			"handles) cannot be looked for: set %s=1, or pass Retainers where the test starts",
			plural(unregistered, "live tensor"), retainersEnv))
	}
	if len(targets) > 0 {
		res, err := retainers.Find(targets, retainers.Config{Own: []string{ownPackage}})
		if err != nil {
			notes = append(notes, "not searched: "+strings.TrimPrefix(err.Error(), "retainers: "))
		} else {
			for k, p := range res.Paths {
				if res.Found[k] {
					l := &le.Leaks[owners[k].leak]
					l.KeptBy = append(l.KeptBy, p.String())
				}
			}
			if res.Note != "" {
				notes = append(notes, res.Note)
			}
			// Two runs print the same report: no sizes, no times.
			notes = append(notes, "searched for "+plural(len(targets), "handle")+" in a heap dump")
		}
	}
	le.Retainers = strings.Join(notes, "; ")
}

// ownPackage is this package's import path: its frames, looking for the
// handles, are no path to them.
const ownPackage = "github.com/tensorlife/tensorlife/track/tracktest"
