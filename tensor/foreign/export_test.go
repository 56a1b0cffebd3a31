package foreign

// WaitReleases blocks until every dropped adoption queued so far has been
// released and no releaser runs: what a test waits on, instead of a clock.
func WaitReleases() { releases.waitIdle() }
