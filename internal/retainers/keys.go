package retainers

import (
	"debug/dwarf"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// formatValue renders a value of type t held in b (a map key), short.
func (n *namer) formatValue(t *dtype, b []byte, depth int) string {
	u := n.dw.underlying(t)
	if u == nil || depth > 2 {
		return "?"
	}
	switch n.kindOf(t) {
	case kindString:
		p, ok1 := word(b, 0)
		l, ok2 := word(b, 8)
		if !ok1 || !ok2 {
			return "?"
		}
		return n.formatString(p, l)
	case kindPointer, kindChan, kindMap, kindFunc, kindUnsafePointer:
		p, ok := word(b, 0)
		if !ok {
			return "?"
		}
		return fmt.Sprintf("(%s)(%#x)", displayName(t), p)
	case kindInterface:
		w, ok1 := word(b, 0)
		data, ok2 := word(b, 8)
		if !ok1 || !ok2 || w == 0 {
			return "nil"
		}
		typeAddr := w
		if len(u.fields) > 0 && u.fields[0].name == "tab" {
			typeAddr = n.d.itabs[w]
		}
		dyn := n.typeAt(typeAddr)
		if dyn == nil {
			return "?"
		}
		if n.pointerShaped(dyn) {
			var buf [8]byte
			binary.LittleEndian.PutUint64(buf[:], data)
			return n.formatValue(dyn, buf[:], depth+1)
		}
		size := n.dw.sizeOf(dyn)
		if size <= 0 || size > maxKeyBytes {
			return displayName(dyn) + "(?)"
		}
		vb := n.d.bytesAt(data, uint64(size))
		if vb == nil {
			vb, _ = n.bin.readStatic(data, uint64(size))
		}
		if vb == nil {
			return displayName(dyn) + "(?)"
		}
		v := n.formatValue(dyn, vb, depth+1)
		dt := n.dw.underlying(dyn)
		switch {
		case dt != nil && dt.tag == dwarf.TagStructType && n.kindOf(dyn) == kindStruct:
			return v // a struct's text starts with its type
		case dt != nil && dt.name == displayName(dyn):
			return v // the value says its type: "k", 3, true
		}
		return displayName(dyn) + "(" + v + ")"
	}
	switch u.tag {
	case dwarf.TagBaseType:
		return formatBase(u, b)
	case dwarf.TagStructType:
		var parts []string
		for i, f := range u.fields {
			if i == 4 {
				parts = append(parts, "…")
				break
			}
			parts = append(parts, n.formatValue(n.dw.typ(f.typ), sub(b, f.off), depth+1))
		}
		return displayName(t) + "{" + strings.Join(parts, ", ") + "}"
	case dwarf.TagArrayType:
		elem := n.dw.typ(u.ref)
		es := n.dw.sizeOf(elem)
		var parts []string
		for i := int64(0); i < u.count && es > 0; i++ {
			if i == 4 {
				parts = append(parts, "…")
				break
			}
			parts = append(parts, n.formatValue(elem, sub(b, i*es), depth+1))
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	return "?"
}

// formatString quotes the string at p of l bytes, read from the heap or
// from the executable's read-only data; at most 64 bytes are shown.
func (n *namer) formatString(p, l uint64) string {
	if l == 0 {
		return `""`
	}
	shown := min(l, 64)
	b := n.d.bytesAt(p, shown)
	if b == nil {
		b, _ = n.bin.readStatic(p, shown)
	}
	if b == nil {
		return fmt.Sprintf("string(%d B)", l)
	}
	s := strconv.Quote(string(b))
	if shown < l {
		s = s[:len(s)-1] + `…"`
	}
	return s
}

// formatBase renders a number or a bool.
func formatBase(u *dtype, b []byte) string {
	if int64(len(b)) < u.size || u.size <= 0 {
		return "?"
	}
	var v uint64
	switch u.size {
	case 1:
		v = uint64(b[0])
	case 2:
		v = uint64(binary.LittleEndian.Uint16(b))
	case 4:
		v = uint64(binary.LittleEndian.Uint32(b))
	case 8:
		v = binary.LittleEndian.Uint64(b)
	default:
		return "?"
	}
	switch {
	case u.name == "bool":
		return strconv.FormatBool(v != 0)
	case strings.HasPrefix(u.name, "float"):
		if u.size == 4 {
			return strconv.FormatFloat(float64(math.Float32frombits(uint32(v))), 'g', -1, 32)
		}
		return strconv.FormatFloat(math.Float64frombits(v), 'g', -1, 64)
	case strings.HasPrefix(u.name, "int"):
		shift := 64 - 8*u.size
		return strconv.FormatInt(int64(v<<shift)>>shift, 10)
	case strings.HasPrefix(u.name, "uint"):
		return strconv.FormatUint(v, 10)
	}
	return "?"
}
