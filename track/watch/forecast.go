package watch

import (
	"math"
	"time"

	"github.com/tensorlife/tensorlife/track"
)

// What a forecast's headroom is, as Suspect.HeadroomOf says it.
const (
	HeadroomPoolBudget   = "pool budget"   // a pool's budget less what its blocks hold
	HeadroomDeviceMemory = "device memory" // the device's free bytes
)

// nameDevices sets the device of the sites flagged at window n: the device
// with most of each site's live bytes, from one snapshot read from
// counters for all of them, outside the watcher's lock: flags are rare.
func (w *Watcher) nameDevices(flagged []*siteHistory, n uint64) {
	snap, err := w.tr.SnapshotOf(track.Filter{LabelKeys: []string{}})
	if err != nil {
		return // not with this filter; the forecast stays unknown
	}
	want := make(map[*track.Site]map[string]int64, len(flagged))
	for _, h := range flagged {
		want[h.site] = map[string]int64{}
	}
	for _, g := range snap.Groups {
		// A site's shapes past the 64 it counts apart are one group of
		// no device: the groups that name one tell it.
		if by := want[g.Site]; by != nil && g.Device != "" {
			by[g.Device] += g.Bytes
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range flagged {
		if s := h.suspect; s != nil && s.SinceWindow == n {
			var most int64
			for d, b := range want[h.site] {
				if b > most || (b == most && d < s.Device) {
					s.Device, most = d, b
				}
			}
		}
	}
}

// estimate is one suspect's growth rate, read under the lock, to be turned
// into a forecast once the headroom is known.
type estimate struct {
	suspect   *Suspect
	device    string
	perSecond float64
	at        time.Time
}

// estimates returns the growth rate of every suspect at the end of window
// n, the first half of a forecast; nil without suspects, the window of
// most services, which then makes nothing. Called with w.mu held by the
// window end that judged them.
func (w *Watcher) estimates(n uint64) []estimate {
	if len(w.suspects) == 0 {
		return nil
	}
	size := uint64(len(w.times))
	ests := make([]estimate, 0, len(w.suspects))
	for _, h := range w.suspects {
		h.fillTo(n)
		// From the first window that grew: the time before it, since the
		// baseline, says nothing of the rate, only of when it began.
		start := max(h.baseAt, n-min(n, uint64(w.cfg.history)))
		from := start
		for from < n && h.value(from+1) <= h.value(from) {
			from++
		}
		if from++; from >= n {
			from = start // no growth within reach but the last window: the whole span
		}
		e := estimate{suspect: h.suspect, device: h.suspect.Device, at: w.times[n%size]}
		if dt := e.at.Sub(w.times[from%size]).Seconds(); dt > 0 {
			e.perSecond = float64(h.value(n)-h.value(from)) / dt
		}
		ests = append(ests, e)
	}
	return ests
}

// forecast updates the RunsOutIn of the suspects estimated (estimates)
// from their growth and the headroom of their device, asked of the
// tracker's attached allocators outside the lock: they are other packages'
// code.
func (w *Watcher) forecast(ests []estimate) {
	if len(ests) == 0 {
		return
	}
	type room struct {
		left  int64
		of    string
		scale float64
	}
	rooms := map[string]room{}
	for _, e := range ests {
		if _, ok := rooms[e.device]; !ok && e.device != "" {
			left, of, scale := w.headroom(e.device)
			rooms[e.device] = room{left, of, scale}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range ests {
		s := e.suspect
		if h := w.sites[s.Site.ID()]; h == nil || h.suspect != s {
			continue // cleared meanwhile
		}
		r := rooms[e.device]
		s.GrowthPerSecond, s.Headroom, s.HeadroomOf, s.ForecastAt = e.perSecond*r.scale, r.left, r.of, e.at
		s.RunsOutIn = runsOutIn(r.left, r.of, s.GrowthPerSecond)
		if s.RanOut != "" {
			s.RunsOutIn = 0 // nothing left to forecast: it has run out (Suspect.RanOut)
		}
	}
}

// runsOutIn is left bytes at perSecond; 0 when either is unknown.
func runsOutIn(left int64, of string, perSecond float64) time.Duration {
	if of == "" || perSecond <= 0 || math.IsNaN(perSecond) {
		return 0
	}
	secs := float64(max(left, 0)) / perSecond
	if secs >= float64(math.MaxInt64)/float64(time.Second) {
		return time.Duration(math.MaxInt64)
	}
	return max(time.Duration(secs*float64(time.Second)), time.Nanosecond)
}

// headroom returns the bytes the allocators on device may still take, and
// of what: the smallest headroom of the pools with a budget there (the
// first to refuse), else the device's free memory as one of the
// allocators tells it (track.PartInfo); of is empty when neither is known. scale is what
// a tensor byte costs that headroom: a pool rounds each tensor up to a
// size class, so its blocks hold more than its tensors, and a leak of
// tensor bytes spends the budget faster by as much (at least 1).
func (w *Watcher) headroom(device string) (left int64, of string, scale float64) {
	var free, held int64
	haveFree := false
	// Each part's answer is read through the tracker's seam and clamped
	// (Books.PartInfos): one that panics is counted and left out, and the
	// forecast goes on without its figure.
	parts, _ := w.tr.Books().PartInfos()
	for _, p := range parts {
		if p.Device != device {
			continue
		}
		budget, l := p.Budget, p.Left
		switch {
		case budget > 0:
			if of != HeadroomPoolBudget || l < left {
				left, of, held = l, HeadroomPoolBudget, budget-l
			}
		case l >= 0 && !haveFree:
			free, haveFree = l, true
		}
	}
	scale = 1
	if of == HeadroomPoolBudget {
		var tensors int64
		for _, c := range w.tr.Books().LiveByClass() {
			if c.Device == device {
				tensors += c.LiveBytes
			}
		}
		if tensors > 0 && held > tensors {
			scale = float64(held) / float64(tensors)
		}
	}
	if of == "" && haveFree {
		left, of = free, HeadroomDeviceMemory
	}
	return left, of, scale
}

// forecastOf says what s's forecast runs out of, "pool budget on cuda:0";
// empty without a forecast.
func forecastOf(s Suspect) string {
	if s.RunsOutIn == 0 {
		return ""
	}
	return s.HeadroomOf + " on " + s.Device
}
