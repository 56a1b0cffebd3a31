package foreign

import "github.com/tensorlife/tensorlife/tensor"

// WaitReleases blocks until every dropped adoption queued so far has been
// released: package tensor's release queue runs their Release.
func WaitReleases() { tensor.WaitReleases() }
