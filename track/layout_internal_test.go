package track

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"

	"github.com/tensorlife/tensorlife/internal/counter"
)

// The shards start on a cache line whatever the head holds: a field added
// to the config must not make every shard straddle two lines.
func TestShardsOnCacheLines(t *testing.T) {
	var tr Tracker
	assert.Zero(t, unsafe.Offsetof(tr.shards)%counter.CacheLine)
	assert.Zero(t, unsafe.Sizeof(tr.shards[0])%counter.CacheLine)
	assert.Zero(t, unsafe.Sizeof(tr.requests.shards[0])%counter.CacheLine)
}
