// Package intern is tensorlife's one bounded intern table: a fixed-size,
// open-addressed hash table that maps a key to the one value kept for it,
// for the tables the record and free paths consult on every call (call
// sites, frame-pointer walks, Metas, free lines).
//
// What the record path needs from such a table shapes it:
//
//   - A lookup takes no lock and allocates nothing: a hash, a probe or two
//     and a compare. The table never grows and never deletes, so a slot
//     once filled is never moved or emptied, and a lookup that loads a slot
//     reads a value that is complete and stays.
//   - An insert takes a lock, once per distinct key: it is the rare path,
//     and the lock lets the table number values densely in the order they
//     were kept (a site's ID, a free line's number) before they are seen.
//   - Memory is bounded: the size is chosen at construction (Limits), and a
//     key is looked for in at most Limits.Probes slots, so a crowded region
//     costs a few compares rather than a scan. When the table is full, or
//     every slot a key may use holds another key, Insert returns ok=false
//     and counts it (Refused): the caller decides what a value that is not
//     kept costs (the overflow site, a walk served by runtime.Callers, a
//     Meta that is not shared), and can show the count.
//
// The table knows nothing of keys. A caller hashes its key with Hash, the
// one hash function of these tables, and passes a function that says
// whether a kept value is the one for its key; values usually carry their
// key, or its hash, to compare. Lookup is small enough to be inlined, and
// with it the comparison, so the hot path makes no indirect call.
//
// A Table is safe for concurrent use. It must not be copied after first use.
package intern
