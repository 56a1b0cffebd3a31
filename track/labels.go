package track

import (
	"context"
	"hash/maphash"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode"

	"github.com/tensorlife/tensorlife/internal/format"
)

// Labels is an immutable set of key/value pairs, as pprof.Labels.
type Labels struct {
	set *labelSet
}

// labelSet holds keys and values interleaved, sorted by key, keys unique,
// and a hash of them: equal sets made by separate WithLabels calls are
// different pointers with one hash, which is how snapshots group them.
type labelSet struct {
	kv []string
	// hashed is the hash of kv, made by the first reader that groups by
	// labels (hash) rather than by every WithLabels: most sets are never
	// grouped. 0 while not made yet.
	hashed    atomic.Uint64
	truncated bool // a value or key was cut, or keys were dropped (maxLabelKeys)
	inline    [2 * inlineLabels]string
}

// inlineLabels is how many pairs a label set holds without a slice of its
// own: a request's id and a model, say.
const inlineLabels = 2

// Bounds of one label set: every report that prints labels stays bounded
// whatever a request puts in them (a header's value, an id per request).
// Longer keys and values are cut and marked with "…", and invalid UTF-8
// becomes U+FFFD, so every text that shows labels is valid; keys past the bound
// are dropped, their number kept under "!DROPPED". A tracker counts the
// tensors recorded with such labels (Totals.LabelsTruncated).
const (
	maxLabelKeys  = 16
	maxLabelBytes = 256
	droppedKey    = "!DROPPED"
)

// cut bounds a label key or value at maxLabelBytes of valid UTF-8
// (format.Text: an invalid byte becomes U+FFFD, a cut ends with "…"), and
// reports whether it changed s.
func cut(s string) (string, bool) { return format.Text(s, maxLabelBytes) }

// badKey holds the value of an unpaired trailing argument to WithLabels, as
// log/slog does, so that a mistake is visible rather than dropped.
const badKey = "!BADKEY"

// WithLabels returns a context whose allocations carry the labels kv (key,
// value pairs) besides ctx's, at most 16 keys of 256 bytes (the rest cut or
// dropped: Totals.LabelsTruncated). When ctx can end and is under no
// request yet, it begins one that ends with ctx, as WithRequest does, and
// nothing else ends it: label calls on contexts that share ctx's Done
// channel (a layer's labels, each job of a worker that labels its
// long-lived context) are that one request. A worker that labels its
// context per job therefore holds one long request, judged only when the
// context ends: scope each job with WithRequest instead. It starts no
// goroutine.
func WithLabels(ctx context.Context, kv ...string) context.Context {
	if len(kv) == 0 {
		return ctx
	}
	if ctx == nil {
		ctx = context.Background() // as LabelsFrom reads a nil ctx
	}
	sc := scopeOf(ctx)
	if sc.req == nil {
		if done := ctx.Done(); done != nil {
			// The request, its labels and its context in one allocation:
			// every record made under it keeps the first two.
			all := new(struct {
				q request
				l labelSet
				c scopeCtx
			})
			all.q.done, all.q.labelled = done, true // set in place: no 352-byte literal copied
			sc.req = &all.q
			sc.labels = Labels{set: sc.labels}.withInto(&all.l, kv).set
			all.c = scopeCtx{Context: ctx, sc: sc}
			return &all.c
		}
	}
	sc.labels = Labels{set: sc.labels}.withInto(&labelSet{}, kv).set
	return withScope(ctx, sc)
}

// LabelsFrom returns the labels ctx carries.
func LabelsFrom(ctx context.Context) Labels { return Labels{set: scopeOf(ctx).labels} }

// NewLabels builds Labels from key, value pairs, as WithLabels does.
func NewLabels(kv ...string) Labels { return Labels{}.with(kv) }

func (l Labels) with(kv []string) Labels { return l.withInto(&labelSet{}, kv) }

// withInto is with, filling set with the result when it holds few keys.
func (l Labels) withInto(set *labelSet, kv []string) Labels {
	if len(kv)%2 == 1 {
		last := kv[len(kv)-1]
		kv = append(kv[:len(kv)-1:len(kv)-1], badKey, last)
	}
	truncated := l.set != nil && l.set.truncated
	if l.Len()+len(kv)/2 > maxLabelKeys {
		return l.withMany(kv, truncated)
	}
	// At most maxLabelKeys pairs: merge in place, with no map, in the one
	// slice the set keeps (its inline array for a few).
	pairs := set.inline[:0]
	if n := 2*l.Len() + len(kv); n > len(set.inline) {
		pairs = make([]string, 0, n)
	}
	if l.set != nil {
		pairs = append(pairs, l.set.kv...)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		k, kc := cut(kv[i])
		v, vc := cut(kv[i+1])
		truncated = truncated || kc || vc
		j := 0
		for j < len(pairs) && pairs[j] != k {
			j += 2
		}
		if j < len(pairs) {
			pairs[j+1] = v
			continue
		}
		pairs = append(pairs, k, v)
		for j = len(pairs) - 2; j > 0 && pairs[j-2] > pairs[j]; j -= 2 { // insertion: few keys
			pairs[j-2], pairs[j-1], pairs[j], pairs[j+1] = pairs[j], pairs[j+1], pairs[j-2], pairs[j-1]
		}
	}
	set.kv, set.truncated = pairs, truncated
	return Labels{set: set}
}

// withMany is with for more keys than a set keeps: the keys past the bound
// are dropped and counted under droppedKey.
func (l Labels) withMany(kv []string, truncated bool) Labels {
	m := make(map[string]string, l.Len()+len(kv)/2)
	l.Range(func(k, v string) bool { m[k] = v; return true })
	for i := 0; i+1 < len(kv); i += 2 {
		k, kc := cut(kv[i])
		v, vc := cut(kv[i+1])
		m[k] = v
		truncated = truncated || kc || vc
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if len(keys) > maxLabelKeys {
		dropped := 0
		if prev, ok := m[droppedKey]; ok { // dropped before, and again now
			dropped, _ = strconv.Atoi(prev)
			keys = slices.DeleteFunc(keys, func(k string) bool { return k == droppedKey })
		}
		dropped += len(keys) - (maxLabelKeys - 1)
		keys = append(keys[:maxLabelKeys-1], droppedKey)
		slices.Sort(keys)
		m[droppedKey] = strconv.Itoa(dropped)
		truncated = true
	}
	pairs := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		pairs = append(pairs, k, m[k])
	}
	return Labels{set: newLabelSet(pairs, truncated)}
}

// newLabelSet makes the set of pairs, sorted by key, keys unique.
func newLabelSet(pairs []string, truncated bool) *labelSet {
	return &labelSet{kv: pairs, truncated: truncated}
}

// hashLabels hashes sorted pairs: equal sets hash alike.
func hashLabels(pairs []string) uint64 {
	h := maphash.Hash{}
	h.SetSeed(labelSeed)
	for _, s := range pairs {
		h.WriteString(s)
		h.WriteByte(0)
	}
	return h.Sum64()
}

// labelSeed seeds every label hash of the process.
var labelSeed = maphash.MakeSeed()

// hash returns a hash of the labels' content; 0 for no labels.
func (l Labels) hash() uint64 {
	if l.Len() == 0 {
		return 0
	}
	return l.set.hash()
}

// hash returns the hash of the set's pairs (hashLabels), made once: racing
// first readers store the same value.
func (s *labelSet) hash() uint64 {
	if h := s.hashed.Load(); h != 0 {
		return h
	}
	h := hashLabels(s.kv) | 1 // never 0, which means not made yet; labelHash marks its own alike
	s.hashed.Store(h)
	return h
}

// Len returns the number of labels.
func (l Labels) Len() int {
	if l.set == nil {
		return 0
	}
	return len(l.set.kv) / 2
}

// Get returns the value of key and whether it is set.
func (l Labels) Get(key string) (string, bool) {
	if l.set == nil {
		return "", false
	}
	for i := 0; i < len(l.set.kv); i += 2 {
		if l.set.kv[i] == key {
			return l.set.kv[i+1], true
		}
	}
	return "", false
}

// Range calls f for each label in key order until f returns false.
func (l Labels) Range(f func(key, value string) bool) {
	if l.set == nil || f == nil {
		return
	}
	for i := 0; i < len(l.set.kv); i += 2 {
		if !f(l.set.kv[i], l.set.kv[i+1]) {
			return
		}
	}
}

// Equal reports whether l and o hold the same pairs.
func (l Labels) Equal(o Labels) bool {
	if l.set == o.set {
		return true
	}
	if l.Len() != o.Len() {
		return false
	}
	return l.Len() == 0 || slices.Equal(l.set.kv, o.set.kv)
}

// String renders the labels as {k=v, k=v} in key order, quoting keys and
// values (strconv.Quote) that could make two sets render alike.
func (l Labels) String() string {
	var b strings.Builder
	b.WriteByte('{')
	first := true
	l.Range(func(k, v string) bool {
		if !first {
			b.WriteString(", ")
		}
		first = false
		b.WriteString(quoteLabel(k))
		b.WriteByte('=')
		b.WriteString(quoteLabel(v))
		return true
	})
	b.WriteByte('}')
	return b.String()
}

// quoteLabel quotes s when it could be read as more than one label.
func quoteLabel(s string) string {
	if strings.ContainsFunc(s, func(r rune) bool {
		return r == ',' || r == '=' || r == '{' || r == '}' || r == '"' || r == ' ' || !unicode.IsPrint(r)
	}) {
		return strconv.Quote(s)
	}
	return s
}
