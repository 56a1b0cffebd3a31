package track

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tensorlife/tensorlife/internal/counter"
	"github.com/tensorlife/tensorlife/internal/format"
	"github.com/tensorlife/tensorlife/internal/histogram"
)

// What each kind of request costs. A tracker made with RequestKinds names
// the label keys whose values make a request's kind ("route", "model");
// when a request ends, its peak in-flight bytes, its duration and what it
// still held (what outlived it) join the statistics of its kind and
// device, in fixed log-scale histograms: bounded whatever the traffic, so
// that a service sizes its caches and admission from what its requests
// held at their largest rather than from a guess.

// OtherKind is the kind of a request that carries none of the kind keys,
// and of every kind past the bound (MaxRequestKinds): a key with
// unbounded values (a request id) makes at most that many kinds.
const OtherKind = "other"

// MaxRequestKinds bounds the kinds (with their devices) a tracker keeps
// apart; later kinds count under OtherKind on their device. The rows, kind
// and device, are bounded too, at 2 × MaxRequestKinds: a row past them (a
// service with thousands of device names) counts under OtherKind on the
// device OtherKind, the last row.
const MaxRequestKinds = 32

// maxKindRows bounds a tracker's rows of request kinds by device.
const maxKindRows = 2 * MaxRequestKinds

// MaxKindText bounds a kind's text, a metric attribute
// (tensorlife.request.kind): a longer one is cut, marked "…" (format.Text).
const MaxKindText = 256

// maxKindKeys bounds the keys of RequestKinds.
const maxKindKeys = 4

// RequestKinds names the label keys (1..4, distinct, non-empty) whose values
// make a request's kind, in that order: RequestKinds("route", "model")
// makes "route=/generate model=llama". A request's labels are those of its
// record with the most labels; a key it lacks is left out of its kind, and
// a request with none of them is of OtherKind. Tracker.RequestCosts reads
// the statistics. Without it the tracker keeps none.
func RequestKinds(keys ...string) Option {
	keys = slices.Clone(keys)
	return optionFunc(func(c *config) error {
		if len(keys) == 0 || len(keys) > maxKindKeys {
			return fmt.Errorf("%w: RequestKinds(%q): want 1..%d keys", ErrInvalidOption, keys, maxKindKeys)
		}
		for i, k := range keys {
			if k == "" || slices.Contains(keys[:i], k) {
				return fmt.Errorf("%w: RequestKinds(%q): want distinct, non-empty keys", ErrInvalidOption, keys)
			}
		}
		c.kindKeys = keys
		return nil
	})
}

// RequestKindStats is what the ended requests of one kind on one device
// cost: how many, their peak in-flight bytes and durations as percentiles,
// and the bytes that outlived them. A percentile is read from a
// log-scale histogram of 8 buckets a power of two (each at most 12.5%
// wide): it is the largest value seen in the bucket that holds it, so it is
// exact when that bucket saw one value, and never below the true
// percentile's bucket. Max is exact.
type RequestKindStats struct {
	// Kind is the request kind: the values of the RequestKinds keys.
	Kind string
	// Device is the device of its requests' first tensors.
	Device string
	// Requests counts the requests of the kind that ended.
	Requests int64
	// PeakP50 is the median of the most bytes each request held in
	// flight at once.
	PeakP50 int64
	// PeakP99 is the 99th percentile of the peaks.
	PeakP99 int64
	// PeakMax is the largest peak, exact.
	PeakMax int64
	// DurationP50 is the median of how long its requests were open, from
	// their first record to the end the tracker saw: their end function,
	// or, begun by WithLabels, the reading that found their context done.
	DurationP50 time.Duration
	// DurationP99 is the 99th percentile of the durations.
	DurationP99 time.Duration
	// DurationMax is the longest duration, exact.
	DurationMax time.Duration
	// OutlivedBytes sums what its requests still held when they ended.
	OutlivedBytes int64
	// Peaks are the histogram of the peaks, the buckets that saw any,
	// smallest first: what a metrics exporter turns into its own.
	Peaks []Bucket
}

// Bucket is one bucket of a histogram: the values in [Low, High) it
// counted, and the largest of them.
type Bucket struct {
	// Low is the lowest value the bucket counts.
	Low int64
	// High is the lowest value past it.
	High int64
	// Count is how many values it counted.
	Count int64
	// Max is the largest of them.
	Max int64
}

// RequestCosts returns the statistics of every request kind on every
// device, by kind then device, OtherKind last; nil without RequestKinds.
// It reads the bounded table once under its lock: O(kinds × buckets). A
// request begun by WithLabels counts once its end is found (Totals).
func (t *Tracker) RequestCosts() []RequestKindStats {
	k := &t.kinds
	if len(k.keys) == 0 {
		return nil
	}
	t.sweep()
	k.mu.Lock()
	out := make([]RequestKindStats, 0, len(k.byKey))
	for _, s := range k.byKey {
		out = append(out, RequestKindStats{
			Kind: s.kind, Device: s.device, Requests: s.requests,
			PeakP50: s.peaks.Quantile(0.50), PeakP99: s.peaks.Quantile(0.99), PeakMax: s.peaks.Max(),
			DurationP50:   time.Duration(s.durations.Quantile(0.50)),
			DurationP99:   time.Duration(s.durations.Quantile(0.99)),
			DurationMax:   time.Duration(s.durations.Max()),
			OutlivedBytes: s.outlived,
			Peaks:         bucketsOf(&s.peaks),
		})
	}
	k.mu.Unlock()
	slices.SortFunc(out, func(a, b RequestKindStats) int {
		if ao, bo := a.Kind == OtherKind, b.Kind == OtherKind; ao != bo {
			if ao {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Device, b.Device))
	})
	return out
}

// kindTable keeps a tracker's statistics per request kind and device.
// Its lock is taken once per request, at its end, never on the record
// path.
type kindTable struct {
	keys  []string // RequestKinds; empty: no statistics
	mu    sync.Mutex
	byKey map[kindKey]*kindStats
	apart int // kinds other than OtherKind in byKey
}

type kindKey struct{ kind, device string }

type kindStats struct {
	kind, device string
	requests     int64
	outlived     int64
	peaks        histogram.Histogram
	durations    histogram.Histogram
}

// kindOf renders l's values of keys as a kind, OtherKind for none.
func kindOf(keys []string, l Labels) string {
	var b strings.Builder
	for _, k := range keys {
		if v, ok := l.Get(k); ok {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(k)
			b.WriteByte('=')
			b.WriteString(v)
		}
	}
	if b.Len() == 0 {
		return OtherKind
	}
	s, _ := format.Text(b.String(), MaxKindText)
	return s
}

// ended counts q, which has just ended at now (the tracker's nanoseconds
// since its start): its peak, duration and the bytes it still held. Called
// with q.mu held; the table's lock comes after it.
func (k *kindTable) ended(t *Tracker, q *request) {
	if len(k.keys) == 0 {
		return
	}
	kind := kindOf(k.keys, Labels{set: q.labels})
	var dur int64
	if b := q.entry.begun; b != 0 {
		dur = max(t.unixAt(t.now())-b, 0)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	key := kindKey{kind, q.device()}
	s := k.byKey[key]
	if s == nil && kind != OtherKind && k.apart >= MaxRequestKinds {
		key.kind = OtherKind
		s = k.byKey[key]
	}
	if s == nil && len(k.byKey) >= maxKindRows-1 { // the last row is the catch-all
		key = kindKey{OtherKind, OtherKind}
		s = k.byKey[key]
	}
	if s == nil {
		if k.byKey == nil {
			k.byKey = make(map[kindKey]*kindStats)
		}
		s = &kindStats{kind: key.kind, device: key.device}
		k.byKey[key] = s
		if key.kind != OtherKind {
			k.apart++
		}
	}
	s.requests++
	s.outlived = counter.AddSat(s.outlived, max(q.inFlight.Load(), 0))
	s.peaks.Add(q.peak)
	s.durations.Add(dur)
}

// bucketsOf returns the buckets of h that counted any value.
func bucketsOf(h *histogram.Histogram) []Bucket {
	in := h.Buckets()
	out := make([]Bucket, len(in))
	for i, b := range in {
		out[i] = Bucket{Low: b.Low, High: b.High, Count: b.Count, Max: b.Max}
	}
	return out
}

// KindOf returns the request kind of labels l, as RequestCosts names it:
// the values of the RequestKinds keys, OtherKind for none (and without
// RequestKinds). A service passes it LabelsFrom(ctx) to name the kind of
// a request before it has made any tensor, for admission.
func (t *Tracker) KindOf(l Labels) string {
	if len(t.kinds.keys) == 0 {
		return OtherKind
	}
	return kindOf(t.kinds.keys, l)
}

// KindPeak is what admission reads of one request kind on one device: how
// many of its requests ended, and their peak in-flight bytes at the 99th
// percentile and at most.
type KindPeak struct {
	Requests int64
	PeakP99  int64
	PeakMax  int64
}

// RequestPeak returns the peaks of kind on device, and false if no
// request of it has ended there (or without RequestKinds). It allocates
// nothing: it is one map lookup and one pass over the kind's histogram
// under the table's lock, whatever the open requests, so a server may
// call it for every request it admits; a request begun by WithLabels
// whose context is done counts once its end is found (Totals).
func (bk *Books) RequestPeak(kind, device string) (KindPeak, bool) {
	t := (*Tracker)(bk)
	k := &t.kinds
	if len(k.keys) == 0 {
		return KindPeak{}, false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	s := k.byKey[kindKey{kind, device}]
	if s == nil {
		return KindPeak{}, false
	}
	return KindPeak{Requests: s.requests, PeakP99: s.peaks.Quantile(0.99), PeakMax: s.peaks.Max()}, true
}
