package track

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A site recorded through an adapter names the first frame outside the
// library it wraps and the adapter, once both are marked, whatever helpers
// the tracker has.
func TestAdapterPackagesTrimTheWrappedLibrary(t *testing.T) {
	user := Frame{Function: "example.invalid/service.handle", File: "/src/service/handle.go", Line: 40}
	frames := []Frame{
		{Function: "github.com/tensorlife/tensorlife/track.(*Tracker).Record", File: "/src/track/tracker.go"},
		{Function: "example.invalid/adaptertest.(*backend).record", File: "/src/adaptertest/backend.go"},
		{Function: "example.invalid/mlvendor/graph.(*Exec).Exec", File: "/src/mlvendor/graph/exec.go"},
		user,
	}
	site := func() *Site {
		s := &Site{frames: frames}
		s.symOnce.Do(func() {})
		return s
	}
	assert.Equal(t, frames[1], site().Location(), "unmarked, the adapter's frame is the headline")

	require.NoError(t, AdapterPackages("example.invalid/adaptertest.", "example.invalid/mlvendor/"))
	require.NoError(t, AdapterPackages("example.invalid/mlvendor/"), "a repeat is no new prefix")
	assert.Equal(t, user, site().Location())
	assert.Equal(t, []Frame{user}, site().UserFrames())

	// The adapter's tests are the caller's code, as tensorlife's are.
	testFrame := Frame{Function: "example.invalid/adaptertest.TestX", File: "/src/adaptertest/x_test.go"}
	assert.False(t, isLibraryFrame(testFrame))
	assert.True(t, isLibraryFrame(frames[1]))
	assert.False(t, isLibraryFrame(Frame{Function: "example.invalid/adaptertestmore.F", File: "/src/f.go"}),
		"a package prefix ending in '.' names that package alone")
}

func TestAdapterPackagesRejectsBadPrefixes(t *testing.T) {
	for _, bad := range []string{"", "x", "example.invalid/noend", "has space/", strings.Repeat("a", 2000) + "/"} {
		err := AdapterPackages("example.invalid/goodbutunused/", bad)
		require.Error(t, err, "%q", bad)
		assert.True(t, errors.Is(err, ErrInvalidOption), "%v", err)
	}
	cur := adapterMarks.prefixes.Load()
	if cur != nil {
		assert.NotContains(t, *cur, "example.invalid/goodbutunused/", "a call with a bad prefix adds none")
	}
}
