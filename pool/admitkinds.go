package pool

import (
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tensorlife/tensorlife/internal/histogram"
	"github.com/tensorlife/tensorlife/track"
)

// What each kind of admitted request held at its largest, in the pool's
// own rounded bytes: each admission counts the blocks handed out under its
// context (drawn from its reservation or past it) and keeps its peak, and
// when it ends the peak joins its kind's figures here. The tracker's peaks
// (track.Books.RequestPeak) count the bytes asked for; a request of many
// small tensors is rounded up tensor by tensor, which no figure of the sum
// can say, so once a kind has AdmitHistory admitted requests behind it on
// this pool, Admit reserves by these.
//
// A kind keeps two figures. For requests admitted without a size (Admit),
// a log-scale histogram of peaks, whose p99 is reserved. For requests
// admitted with one (AdmitSized), the last fitSamples (size, peak) pairs
// and the line base + perUnit × size above them all: the least-squares
// slope, raised until no sample is above it. The line reserved by is
// raised at once to a higher fit and lowered towards a lower one by
// 1/lowerSlowly of the difference per ended request, as Kubernetes'
// vertical pod autoscaler keeps its recommendation: a burst of small
// requests does not at once undo what a large one showed. A size past the
// largest of the samples has no history: it reserves the fallback.
//
// A kind whose admitted request ran out of memory, or held more than its
// reservation, raises its boost at once (×2 after running out, ×1.5 past
// its reservation, at most ×maxBoost); each request that ends within its
// reservation lowers it by 1/lowerSlowly of what it is above 1. What the
// boost makes of a reservation never passes the fallback, unless the
// kind's history alone does.

// admitKinds is a pool's table of request kinds, bounded to
// track.MaxRequestKinds kinds; the rest share one entry, track.OtherKind,
// which counts them but learns nothing (they reserve by the tracker's
// figures or the fallback). Its lock is read-locked once when a request
// is admitted or refused, and locked to add a kind.
type admitKinds struct {
	mu     sync.RWMutex
	byKind map[string]*admitKind
	other  *admitKind
}

// admitKind is one kind's counters (atomics, read by Stats without a lock)
// and what it learned (under mu).
type admitKind struct {
	name      string
	learns    bool // false for the shared track.OtherKind entry
	admitted  atomic.Int64
	refused   atomic.Int64
	ranOut    atomic.Int64
	past      atomic.Int64
	open      atomic.Int64
	reserved  atomic.Int64 // the open admissions' reservations
	learnedMu sync.Mutex
	hist      histogram.Histogram
	fit       sizeFit
	boost     float64 // >= 1 once set; 0 reads as 1
}

// Bounds of what a kind learns.
const (
	fitSamples  = 64
	lowerSlowly = 16
	maxBoost    = 8
)

// kind returns the entry of kind, making it (or, past the bound, the
// shared one).
func (t *admitKinds) kind(kind string) *admitKind {
	t.mu.RLock()
	k := t.byKind[kind]
	t.mu.RUnlock()
	if k != nil {
		return k
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if k := t.byKind[kind]; k != nil {
		return k
	}
	if len(t.byKind) >= track.MaxRequestKinds || kind == track.OtherKind {
		if t.other == nil {
			t.other = &admitKind{name: track.OtherKind}
		}
		return t.other
	}
	if t.byKind == nil {
		t.byKind = make(map[string]*admitKind)
	}
	k = &admitKind{name: kind, learns: true}
	t.byKind[kind] = k
	return k
}

// all returns the kinds, sorted by name, the shared entry last.
func (t *admitKinds) all() []*admitKind {
	t.mu.RLock()
	out := make([]*admitKind, 0, len(t.byKind)+1)
	for _, k := range t.byKind {
		out = append(out, k)
	}
	other := t.other
	t.mu.RUnlock()
	slices.SortFunc(out, func(a, b *admitKind) int { return strings.Compare(a.name, b.name) })
	if other != nil {
		out = append(out, other)
	}
	return out
}

// reservation returns what a request of k of units (0: unstated) reserves,
// the ended requests that figure rests on, and whether it is the fallback:
// k's learned figure once AdmitHistory requests of it have ended (for a
// size, requests with a size, and the size within theirs), boosted.
func (k *admitKind) reservation(units, fallback int64) (want, requests int64, isFallback bool) {
	if !k.learns {
		return fallback, 0, true
	}
	k.learnedMu.Lock()
	defer k.learnedMu.Unlock()
	var learned float64
	if units > 0 {
		if k.fit.ended < AdmitHistory || units > k.fit.maxUnits {
			return fallback, k.fit.ended, true
		}
		requests = k.fit.ended
		learned = k.fit.base + k.fit.perUnit*float64(units)
	} else {
		requests = k.hist.Count()
		if k.hist.Count() < AdmitHistory {
			return fallback, requests, true
		}
		learned = float64(k.hist.Quantile(0.99))
	}
	boosted := learned * max(k.boost, 1)
	if limit := max(float64(fallback), learned); boosted > limit {
		boosted = limit
	}
	return satBytes(boosted), requests, false
}

// satBytes rounds b up to whole bytes, saturating.
func satBytes(b float64) int64 {
	if b >= math.MaxInt64 {
		return math.MaxInt64
	}
	return max(int64(math.Ceil(b)), 0)
}

// ended joins an ended admission of k to what k learned.
func (k *admitKind) ended(a *Admission) {
	k.open.Add(-1)
	k.reserved.Add(-a.Reserved)
	if !k.learns {
		return
	}
	peak := a.peak.Load()
	k.learnedMu.Lock()
	defer k.learnedMu.Unlock()
	k.hist.Add(peak)
	if a.Units > 0 {
		k.fit.add(a.Units, peak)
	}
	if a.flags.Load() == 0 && k.boost > 1 {
		k.boost = 1 + (k.boost-1)*(lowerSlowly-1)/lowerSlowly
	}
}

// raise multiplies k's boost by f, at once.
func (k *admitKind) raise(f float64) {
	if !k.learns {
		return
	}
	k.learnedMu.Lock()
	k.boost = min(max(k.boost, 1)*f, maxBoost)
	k.learnedMu.Unlock()
}

// AdmissionKind is what a pool's admission knows of one request kind: the
// counts since the pool was made and what it learned. Kinds past
// track.MaxRequestKinds are counted together under track.OtherKind, which
// learns nothing.
type AdmissionKind struct {
	// Kind is the request kind, cut to MaxKindBytes.
	Kind string
	// Admitted counts the kind's requests Admit admitted.
	Admitted int64
	// Refused counts those it refused: the budget could not hold their
	// reservations.
	Refused int64
	// RanOut counts admitted requests that ran out of memory (an
	// allocation under the admission was refused).
	RanOut int64
	// PastReservation counts admitted requests that held more than their
	// reservation at some moment.
	PastReservation int64
	// Open counts the kind's open admissions.
	Open int64
	// Reserved is the bytes the open admissions reserved in all, drawn or
	// not.
	Reserved int64
	// Requests counts the kind's ended admissions on this pool, with a
	// size and without.
	Requests int64
	// P99 is the p99 peak of those, in rounded bytes: what Admit
	// reserves once there are AdmitHistory of them.
	P99 int64
	// Sized counts the ended admissions with a size; the line Base +
	// PerUnit × units rests on the last 64 of them.
	Sized int64
	// Base is the line's bytes at no units.
	Base float64
	// PerUnit is the line's bytes per unit.
	PerUnit float64
	// MaxUnits is the largest size of those 64: a larger request has no
	// history and reserves its fallback.
	MaxUnits int64
	// Boost multiplies the learned reservation after a request ran out or
	// went past its reservation; 1 otherwise.
	Boost float64
}

// read returns k's figures.
func (k *admitKind) read() AdmissionKind {
	s := AdmissionKind{
		Kind: k.name, Admitted: k.admitted.Load(), Refused: k.refused.Load(),
		RanOut: k.ranOut.Load(), PastReservation: k.past.Load(),
		Open: max(k.open.Load(), 0), Reserved: max(k.reserved.Load(), 0), Boost: 1,
	}
	k.learnedMu.Lock()
	defer k.learnedMu.Unlock()
	s.Requests = k.hist.Count()
	if k.hist.Count() > 0 {
		s.P99 = k.hist.Quantile(0.99)
	}
	s.Sized, s.Base, s.PerUnit, s.MaxUnits = k.fit.ended, k.fit.base, k.fit.perUnit, k.fit.maxUnits
	s.Boost = max(k.boost, 1)
	return s
}

// sizeFit is the line a kind's sized requests are reserved by (see the
// comment at the top of this file).
type sizeFit struct {
	units, peaks  [fitSamples]int64
	n, next       int
	ended         int64 // sized admissions ever ended
	base, perUnit float64
	maxUnits      int64
}

func (f *sizeFit) add(units, peak int64) {
	f.units[f.next], f.peaks[f.next] = units, peak
	f.next = (f.next + 1) % fitSamples
	f.n = min(f.n+1, fitSamples)
	f.ended++
	base, perUnit, maxUnits := envelope(f.units[:f.n], f.peaks[:f.n])
	if f.ended <= AdmitHistory {
		// Not reserved by yet: the fit as it stands.
		f.base, f.perUnit, f.maxUnits = base, perUnit, maxUnits
		return
	}
	// The line is followed at its ends over the sizes seen, 0 and
	// maxUnits: each end raised at once or lowered slowly, so the line
	// between them stays above the fit's.
	u := float64(maxUnits)
	at0 := follow(f.base, base)
	atMax := follow(f.base+f.perUnit*u, base+perUnit*u)
	f.base, f.maxUnits = at0, maxUnits
	f.perUnit = 0
	if u > 0 {
		f.perUnit = max(atMax-at0, 0) / u
	}
}

// follow returns cur raised at once to target, or lowered towards it by
// 1/lowerSlowly of the difference.
func follow(cur, target float64) float64 {
	if target >= cur {
		return target
	}
	return cur - (cur-target)/lowerSlowly
}

// envelope returns the line base + perUnit × units that no sample is
// above: the least-squares slope (never negative), its intercept raised to
// the highest sample; and the largest size. With one size, or a falling
// trend, the line is flat at the highest peak; with an intercept below 0,
// it goes through 0 at the steepest sample.
func envelope(units, peaks []int64) (base, perUnit float64, maxUnits int64) {
	var su, sp, maxPeak float64
	for i := range units {
		su += float64(units[i])
		sp += float64(peaks[i])
		maxPeak = max(maxPeak, float64(peaks[i]))
		maxUnits = max(maxUnits, units[i])
	}
	n := float64(len(units))
	mu, mp := su/n, sp/n
	var cov, vu float64
	for i := range units {
		du := float64(units[i]) - mu
		cov += du * (float64(peaks[i]) - mp)
		vu += du * du
	}
	if vu == 0 || cov <= 0 {
		return maxPeak, 0, maxUnits
	}
	perUnit = cov / vu
	base = math.Inf(-1)
	for i := range units {
		base = max(base, float64(peaks[i])-perUnit*float64(units[i]))
	}
	if base >= 0 {
		return base, perUnit, maxUnits
	}
	perUnit = 0
	for i := range units {
		perUnit = max(perUnit, float64(peaks[i])/float64(units[i]))
	}
	return 0, perUnit, maxUnits
}
