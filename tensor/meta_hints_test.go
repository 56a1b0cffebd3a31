package tensor

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMetaHintsCheckContentNotAddress(t *testing.T) {
	kind := "kv-cache"
	other := strings.Clone(kind) // equal content at another address
	m1 := internMeta(kind, "host", Float16, Shape{2, 8})
	m2 := internMeta(other, "host", Float16, Shape{2, 8})
	assert.Same(t, m1, m2, "equal content must share one Meta")

	// Values that may share a hint slot each get their own Meta back.
	for i := range 4 * metaHintSlots {
		shape := Shape{i, 3}
		m := internMeta(kind, "host", Float32, shape)
		require.Equal(t, kind, m.Kind)
		require.Equal(t, "host", m.Device)
		require.Equal(t, "float32", m.DType)
		require.Equal(t, []int(shape), m.Shape)
	}
	m3 := internMeta("mask", "host", Float16, Shape{2, 8})
	assert.Equal(t, "mask", m3.Kind)
	assert.NotSame(t, m1, m3)
}
