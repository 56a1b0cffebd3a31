package oomdump

import "time"

// SetClock replaces the Dumper's clock, so that a test can step past an
// interval without waiting it out.
func (d *Dumper) SetClock(now func() time.Time) { d.now = now }
