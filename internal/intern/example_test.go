package intern_test

import (
	"fmt"

	"github.com/tensorlife/tensorlife/internal/intern"
)

// name is what the table keeps for a string: the string, and the number
// the table gave it.
type name struct {
	text string
	id   int
}

// Interning names: each distinct string is kept once and numbered in the
// order it was first seen; past the bound, a new string is refused and
// counted, and the caller decides what stands in for it.
func Example() {
	names := intern.New[name](intern.Limits{Slots: 8, Values: 2, Probes: 8})
	intern := func(s string) string {
		h := intern.NewHash().String(s).Sum()
		same := func(n *name) bool { return n.text == s }
		n, ok := names.Lookup(h, same)
		if !ok {
			n, ok = names.Insert(h, same, func(id int) *name { return &name{text: s, id: id} })
		}
		if !ok {
			return "refused"
		}
		return fmt.Sprint(n.id)
	}
	for _, s := range []string{"kv-cache", "mask", "kv-cache", "logits"} {
		fmt.Println(s, intern(s))
	}
	fmt.Println("kept", names.Len(), "refused", names.Refused())
	// Output:
	// kv-cache 0
	// mask 1
	// kv-cache 0
	// logits refused
	// kept 2 refused 1
}
