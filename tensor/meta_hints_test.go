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

func TestMetaHintsTellKeysApartByEveryPart(t *testing.T) {
	kind := "kv-cache-entry"
	prefix := kind[:8] // the same address, another length
	big := 1 << 40     // past a hint's int32 dimensions
	for _, tc := range []struct {
		name   string
		kind   string
		device string
		dt     DType
		shape  Shape
	}{
		{"whole kind", kind, "host", Float16, Shape{2, 8}},
		{"prefix of the kind", prefix, "host", Float16, Shape{2, 8}},
		{"another device", kind, "host:1", Float16, Shape{2, 8}},
		{"another dtype", kind, "host", Float32, Shape{2, 8}},
		{"another dimension", kind, "host", Float16, Shape{2, 9}},
		{"another rank", kind, "host", Float16, Shape{2, 8, 1}},
		{"seven dimensions", kind, "host", Float16, Shape{1, 2, 3, 4, 5, 6, 7}},
		{"a dimension past int32", kind, "host", Uint8, Shape{big}},
		{"a dimension that wraps int32", kind, "host", Uint8, Shape{big + 8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 2 { // the second asks the hint the first kept
				m := internMeta(tc.kind, tc.device, tc.dt, tc.shape)
				require.NotNil(t, m)
				assert.Equal(t, tc.kind, m.Kind)
				assert.Equal(t, tc.device, m.Device)
				assert.Equal(t, tc.dt.String(), m.DType)
				assert.Equal(t, []int(tc.shape), m.Shape)
			}
		})
	}
}
