package retainers

import (
	"debug/dwarf"
	"strings"
)

// The runtime's containers, as the linker describes them in the DWARF:
// maps (map<K,V>, table<K,V>, groupReference<K,V> and the group type),
// channels (hchan<T>), and the hash trie under a sync.Map.

// locateTrieNode names the pointer in a node of the hash trie under a
// sync.Map (internal/sync.HashTrieMap): the node is the head of an entry or
// of an indirect node, as its isEntry flag says.
func (n *namer) locateTrieNode(u *dtype, b []byte, rel int64, depth int) ([]seg, cursor, bool) {
	t := n.trieNodeType(u, b)
	if t == nil {
		return nil, cursor{}, false
	}
	return n.locate(t, b, rel, true, depth+1)
}

// trieNodeType returns the type a trie node heads, from its bytes.
func (n *namer) trieNodeType(u *dtype, b []byte) *dtype {
	isEntry := false
	for _, f := range u.fields {
		if f.name == "isEntry" && f.off < int64(len(b)) {
			isEntry = b[f.off] != 0
		}
	}
	name := "internal/sync.indirect[" + strings.TrimPrefix(u.name, "internal/sync.node[")
	if isEntry {
		name = "internal/sync.entry[" + strings.TrimPrefix(u.name, "internal/sync.node[")
	}
	return n.dw.named(name)
}

// locateTrieEntry names the pointer in an entry of a sync.Map's trie: in
// its value, as m.Load(key), or in its key.
func (n *namer) locateTrieEntry(u *dtype, b []byte, rel int64, depth int) ([]seg, cursor, bool) {
	var key, value dfield
	for _, f := range u.fields {
		switch f.name {
		case "key":
			key = f
		case "value":
			value = f
		}
	}
	keyType, valueType := n.dw.typ(key.typ), n.dw.typ(value.typ)
	keyText := n.formatValue(keyType, sub(b, key.off), 0)
	switch {
	case key.name != "" && rel >= key.off && rel < key.off+n.dw.sizeOf(keyType):
		rest, next, ok := n.locate(keyType, sub(b, key.off), rel-key.off, false, depth+1)
		return append([]seg{{kind: segMapKey, text: keyText}}, rest...), next, ok
	case value.name != "" && rel >= value.off && rel < value.off+n.dw.sizeOf(valueType):
		rest, next, ok := n.locate(valueType, sub(b, value.off), rel-value.off, false, depth+1)
		return append([]seg{{kind: segLoadKey, text: keyText}}, rest...), next, ok
	}
	// The overflow chain: another entry of the same hash.
	for _, f := range u.fields {
		if size := n.dw.sizeOf(n.dw.typ(f.typ)); rel >= f.off && rel < f.off+size {
			return n.locate(n.dw.typ(f.typ), sub(b, f.off), rel-f.off, true, depth+1)
		}
	}
	return nil, cursor{}, false
}

// locateMapHeader follows a map's dirPtr: to its one group when the map is
// small (dirLen 0), to its directory of tables otherwise.
func (n *namer) locateMapHeader(u *dtype, b []byte, rel int64) ([]seg, cursor, bool) {
	var dir dfield
	var dirLen int64 = -1
	for _, f := range u.fields {
		switch f.name {
		case "dirPtr":
			dir = f
		case "dirLen":
			if w, ok := word(b, f.off); ok {
				dirLen = int64(w)
			}
		}
	}
	if dir.name == "" || rel != dir.off {
		return nil, cursor{}, false
	}
	// dirPtr is typed **table<K,V>.
	ptrToTable := n.dw.underlying(n.dw.typ(dir.typ))
	if ptrToTable == nil || ptrToTable.tag != dwarf.TagPointerType {
		return nil, cursor{}, false
	}
	tablePtr := n.dw.typ(ptrToTable.ref)
	if dirLen == 0 {
		var table *dtype
		if p := n.dw.underlying(tablePtr); p != nil && p.tag == dwarf.TagPointerType {
			table = n.dw.underlying(n.dw.typ(p.ref))
		}
		var group *dtype
		if table != nil {
			for _, f := range table.fields {
				if f.name == "groups" {
					group = n.groupOf(n.dw.typ(f.typ))
				}
			}
		}
		return nil, cursor{typ: group, mapInternal: true}, group != nil
	}
	return nil, cursor{typ: tablePtr, array: true, mapInternal: true}, true
}

// groupOf returns the group type a groupReference<K,V> points at.
func (n *namer) groupOf(ref *dtype) *dtype {
	ref = n.dw.underlying(ref)
	if ref == nil {
		return nil
	}
	for _, f := range ref.fields {
		if f.name == "data" {
			if p := n.dw.underlying(n.dw.typ(f.typ)); p != nil && p.tag == dwarf.TagPointerType {
				return n.dw.typ(p.ref)
			}
		}
	}
	return nil
}

// chanElemOf returns the element type of the channel an hchan belongs to,
// from its elemtype word.
func (n *namer) chanElemOf(u *dtype, b []byte) *dtype {
	for _, f := range u.fields {
		if f.name == "elemtype" {
			if w, ok := word(b, f.off); ok && w != 0 {
				return n.typeAt(w)
			}
		}
	}
	return nil
}

// locateSlot names the pointer in a map group: in a slot's value, named by
// the slot's key, or in the key itself.
func (n *namer) locateSlot(u *dtype, b []byte, rel int64, depth int) ([]seg, cursor, bool) {
	var slots dfield
	for _, f := range u.fields {
		if f.name == "slots" {
			slots = f
		}
	}
	arr := n.dw.underlying(n.dw.typ(slots.typ))
	if slots.name == "" || arr == nil || arr.tag != dwarf.TagArrayType || rel < slots.off {
		return nil, cursor{}, false
	}
	slot := n.dw.underlying(n.dw.typ(arr.ref))
	size := n.dw.sizeOf(slot)
	if slot == nil || size <= 0 {
		return nil, cursor{}, false
	}
	i := (rel - slots.off) / size
	at := slots.off + i*size
	r := rel - at
	var key, elem dfield
	for _, f := range slot.fields {
		switch f.name {
		case "key":
			key = f
		case "elem":
			elem = f
		}
	}
	keyType := n.dw.typ(key.typ)
	slotBytes := sub(b, at)
	keyText := n.formatValue(keyType, sub(slotBytes, key.off), 0)
	inKey := r >= key.off && r < key.off+n.dw.sizeOf(keyType)
	if inKey {
		rest, next, ok := n.locate(keyType, sub(slotBytes, key.off), r-key.off, false, depth+1)
		return append([]seg{{kind: segMapKey, text: keyText}}, rest...), next, ok
	}
	elemType := n.dw.typ(elem.typ)
	rest, next, ok := n.locate(elemType, sub(slotBytes, elem.off), r-elem.off, false, depth+1)
	return append([]seg{{kind: segKey, text: keyText}}, rest...), next, ok
}
