package intern

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// entry is a test value: its key, and the id Insert gave it.
type entry struct {
	key string
	id  int
}

// keep interns key under hash h, counting the values tab makes.
func keep(tab *Table[entry], h uint64, key string, made *int) (*entry, bool) {
	return tab.Insert(h, func(e *entry) bool { return e.key == key }, func(id int) *entry {
		*made++
		return &entry{key: key, id: id}
	})
}

func find(tab *Table[entry], h uint64, key string) (*entry, bool) {
	return tab.Lookup(h, func(e *entry) bool { return e.key == key })
}

func hashOf(key string) uint64 { return NewHash().String(key).Sum() }

func TestInsertKeepsOneValuePerKeyNumberedInOrder(t *testing.T) {
	tab := New[entry](Limits{Slots: 16, Values: 8, Probes: 16})
	made := 0
	for i, key := range []string{"a", "b", "c"} {
		e, ok := keep(tab, hashOf(key), key, &made)
		require.True(t, ok)
		assert.Equal(t, i, e.id, "ids count values in the order they were kept")
	}
	again, ok := keep(tab, hashOf("b"), "b", &made)
	require.True(t, ok)
	assert.Equal(t, 1, again.id)
	assert.Equal(t, 3, made, "a key kept already makes nothing")

	found, ok := find(tab, hashOf("b"), "b")
	require.True(t, ok)
	assert.Same(t, again, found)
	_, ok = find(tab, hashOf("d"), "d")
	assert.False(t, ok)

	assert.Equal(t, 3, tab.Len())
	assert.False(t, tab.Full())
	assert.Zero(t, tab.Refused())
	var keys []string
	for e := range tab.All() {
		keys = append(keys, e.key)
	}
	slices.Sort(keys)
	assert.Equal(t, []string{"a", "b", "c"}, keys)
}

func TestFullTableRefusesAndCounts(t *testing.T) {
	tab := New[entry](Limits{Slots: 8, Values: 3, Probes: 8})
	made := 0
	var kept []*entry
	for i := range 5 {
		key := fmt.Sprint("key", i)
		e, ok := keep(tab, hashOf(key), key, &made)
		if i < 3 {
			require.True(t, ok, key)
			kept = append(kept, e)
			continue
		}
		assert.False(t, ok, "%s past Values", key)
		assert.Nil(t, e)
	}
	assert.True(t, tab.Full())
	assert.Equal(t, 3, tab.Len())
	assert.Equal(t, 3, made, "a refused key makes nothing")
	assert.EqualValues(t, 2, tab.Refused())

	e, ok := keep(tab, hashOf("key0"), "key0", &made)
	require.True(t, ok, "a full table still finds what it keeps")
	assert.Same(t, kept[0], e)
	assert.EqualValues(t, 2, tab.Refused(), "finding is not refusing")

	_, ok = keep(tab, hashOf("key3"), "key3", &made)
	assert.False(t, ok)
	assert.EqualValues(t, 3, tab.Refused(), "each refused call counts")
}

func TestNothingKeptWithZeroValues(t *testing.T) {
	tab := New[entry](Limits{Slots: 4, Values: 0, Probes: 4})
	made := 0
	_, ok := keep(tab, 1, "a", &made)
	assert.False(t, ok)
	assert.True(t, tab.Full())
	assert.Zero(t, made)
	assert.EqualValues(t, 1, tab.Refused())
}

// Keys that share a neighbourhood of slots are looked for, and kept, in at
// most Probes of them: past that, a key is refused though the table has
// room, and a lookup stops without scanning further.
func TestProbesAreBounded(t *testing.T) {
	tab := New[entry](Limits{Slots: 16, Values: 16, Probes: 3})
	const h = 5 // every key below hashes here
	made := 0
	for i := range 3 {
		_, ok := keep(tab, h, fmt.Sprint(i), &made)
		require.True(t, ok, "key %d has a free slot among its probes", i)
	}
	_, ok := keep(tab, h, "3", &made)
	assert.False(t, ok, "the key's three slots are taken")
	assert.False(t, tab.Full(), "refused for its slots, not for the bound")
	assert.EqualValues(t, 1, tab.Refused())

	compares := 0
	_, ok = tab.Lookup(h, func(*entry) bool { compares++; return false })
	assert.False(t, ok)
	assert.Equal(t, 3, compares, "a lookup compares at most Probes values")

	e, ok := keep(tab, h+3, "elsewhere", &made)
	require.True(t, ok, "a key past the crowded slots still finds room")
	assert.Equal(t, 3, e.id)
}

func TestLimitsAreClamped(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		limits                Limits
		slots, values, probes int
	}{
		{"slots rounded up to a power of two", Limits{Slots: 5, Values: 2, Probes: 2}, 8, 2, 2},
		{"values at most slots", Limits{Slots: 4, Values: 9, Probes: 4}, 4, 4, 4},
		{"probes at most slots", Limits{Slots: 4, Values: 1, Probes: 99}, 4, 1, 4},
		{"at least one slot and probe", Limits{Slots: 0, Values: -1, Probes: 0}, 1, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab := New[entry](tc.limits)
			assert.Len(t, tab.slots, tc.slots)
			assert.EqualValues(t, tc.values, tab.values)
			assert.EqualValues(t, tc.probes, tab.probes)
		})
	}
}

// Goroutines intern the same keys in different orders while others look
// them up (run with -race): every key is kept once, under one id, and every
// goroutine gets the same value for it.
func TestConcurrentLookupsAndInserts(t *testing.T) {
	const keys, inserters, lookers = 200, 4, 4
	tab := New[entry](Limits{Slots: 2 * keys, Values: keys, Probes: 2 * keys})
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprint("site", i)
	}
	got := make([][]*entry, inserters)
	var made sync.Map // key -> number of values made for it
	var wg sync.WaitGroup
	for g := range inserters {
		wg.Go(func() {
			got[g] = make([]*entry, keys)
			for j := range keys {
				i := (j*7 + g*31) % keys // each goroutine its own order
				key := names[i]
				e, ok := tab.Insert(hashOf(key), func(e *entry) bool { return e.key == key }, func(id int) *entry {
					_, dup := made.LoadOrStore(key, true)
					assert.False(t, dup, "%s made twice", key)
					return &entry{key: key, id: id}
				})
				if !assert.True(t, ok) {
					return
				}
				got[g][i] = e
			}
		})
	}
	for range lookers {
		wg.Go(func() {
			for range 5 {
				for _, key := range names {
					if e, ok := find(tab, hashOf(key), key); ok && e.key != key {
						t.Errorf("looked up %s, found %s", key, e.key)
					}
				}
			}
		})
	}
	wg.Wait()

	require.Equal(t, keys, tab.Len())
	ids := make([]bool, keys)
	for i := range keys {
		e := got[0][i]
		require.NotNil(t, e)
		for g := 1; g < inserters; g++ {
			require.Same(t, e, got[g][i], "every goroutine gets one value per key")
		}
		require.False(t, ids[e.id], "id %d given twice", e.id)
		ids[e.id] = true
	}
	assert.Zero(t, tab.Refused())
}
