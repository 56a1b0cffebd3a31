package fpstack_test

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/tensorlife/tensorlife/internal/fpstack"
)

const depth = 32

type stack = [depth]uintptr

// siteCache maps the frame-pointer walk of a stack to the site interned
// from runtime.Callers over the same frames: the walk is the cheap key,
// runtime.Callers runs once per distinct stack.
type siteCache struct {
	byWalk  map[stack]string
	callers int // runtime.Callers captures made
}

// site names the stack from the caller of site's caller up, as a
// tracker's Record names the caller of the allocating function. site and
// its callers that skip passes over are not inlined: Walk's skip counts
// physical frames.
//
//go:noinline
func (c *siteCache) site() string {
	var walked stack
	n, ok := fpstack.Walk(2, walked[:]) // skip site (0) and allocate (1)
	if ok {
		if s, hit := c.byWalk[walked]; hit {
			return s
		}
	}
	var pcs [depth]uintptr
	m := fpstack.Callers(2, pcs[:])
	c.callers++
	s := intern(pcs[:m])
	// Keep the entry only if the walk names every frame runtime.Callers
	// kept: a walk cut short at depth frames is no key for a deeper stack.
	if ok && fpstack.Covers(walked[:n], pcs[:m], depth) {
		c.byWalk[walked] = s
	}
	return s
}

// intern stands in for a site table: here, the innermost function's name.
func intern(pcs []uintptr) string {
	f, _ := runtime.CallersFrames(pcs).Next()
	return f.Function[strings.LastIndexByte(f.Function, '/')+1:]
}

// allocate is a hot path that records its caller's stack.
//
//go:noinline
func allocate(c *siteCache) string { return c.site() }

// A site cache keyed by the frame-pointer walk: the first call from a
// stack pays for runtime.Callers and the check, later ones only the walk.
func Example() {
	c := &siteCache{byWalk: make(map[stack]string)}
	for range 3 {
		fmt.Println(allocate(c))
	}
	fmt.Println("runtime.Callers once:", c.callers == 1 || !fpstack.Supported())
	// Output:
	// fpstack_test.Example
	// fpstack_test.Example
	// fpstack_test.Example
	// runtime.Callers once: true
}
