package tracktest

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLeakStateString(t *testing.T) {
	assert.Equal(t, "live", Live.String())
	assert.Equal(t, "dropped without Free (found by the garbage collector)", Dropped.String())
	assert.Equal(t, "LeakState(9)", LeakState(9).String())
}

func TestEntryNames(t *testing.T) {
	for e, want := range map[entry]string{entryFind: "Find", entryVerifyNone: "VerifyNone",
		entryTestMain: "VerifyTestMain", entryContext: "Context"} {
		assert.Equal(t, want, e.String())
	}
}
