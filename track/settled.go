package track

// Settled reads a tracker as it stood when Settle was called: the requests
// whose contexts were done by then count as ended, and its readers do not
// settle again. A reader of several figures at one moment (the
// out-of-memory error reads the top sites, who holds them and the open
// requests) settles once, where each Tracker reader settles on its own: a
// settle checks every open request's context, O(requests open), and is
// most of what such a read costs with many requests open.
//
// A request whose context ends after Settle counts as open to the readers
// of that Settled unless another reader has settled it since; call Settle
// again for a later moment. The zero Settled reads nothing. Safe for
// concurrent use.
type Settled struct{ t *Tracker }

// Settle ends t's requests whose contexts are done and returns the reading
// of t from that moment.
func (t *Tracker) Settle() Settled {
	t.settle()
	return Settled{t: t}
}
