package retainers

import "encoding/binary"

// DWARF expression operations the namer reads.
const (
	opAddr         = 0x03
	opConsts       = 0x11
	opPlus         = 0x22
	opPlusUconst   = 0x23
	opReg0         = 0x50
	opReg31        = 0x6f
	opBreg0        = 0x70
	opBreg31       = 0x8f
	opRegx         = 0x90
	opFbreg        = 0x91
	opPiece        = 0x93
	opCallFrameCFA = 0x9c
	opStackValue   = 0x9f
)

// piece is one part of a variable's location: size bytes at an offset from
// the frame's CFA, or elsewhere (a register) when onStack is false.
type piece struct {
	onStack bool
	cfaOff  int64
	size    int64
}

// pieces decodes a location expression into stack pieces. A single
// location without DW_OP_piece covers the whole variable (size -1).
func pieces(expr []byte) []piece {
	sleb := func(i int) (int64, int) { return sleb128(expr[i:]) }
	var out []piece
	cur := piece{size: -1}
	have := false
	for i := 0; i < len(expr); {
		op := expr[i]
		i++
		switch {
		case op == opFbreg:
			v, n := sleb(i)
			if n <= 0 {
				return out
			}
			i += n
			cur, have = piece{onStack: true, cfaOff: v, size: -1}, true
		case op == opCallFrameCFA:
			cur, have = piece{onStack: true, size: -1}, true
		case op == opConsts:
			v, n := sleb(i)
			if n <= 0 {
				return out
			}
			i += n
			if i < len(expr) && expr[i] == opPlus {
				i++
				cur.cfaOff += v
			}
		case op == opPlusUconst:
			v, n := binary.Uvarint(expr[i:])
			if n <= 0 {
				return out
			}
			i += n
			cur.cfaOff += int64(v)
		case op >= opReg0 && op <= opReg31:
			cur, have = piece{size: -1}, true
		case op == opRegx:
			_, n := binary.Uvarint(expr[i:])
			if n <= 0 {
				return out
			}
			i += n
			cur, have = piece{size: -1}, true
		case op >= opBreg0 && op <= opBreg31:
			_, n := sleb(i)
			if n <= 0 {
				return out
			}
			i += n
			cur, have = piece{size: -1}, true // relative to a register: not a frame slot
		case op == opPiece:
			v, n := binary.Uvarint(expr[i:])
			if n <= 0 {
				return out
			}
			i += n
			cur.size = int64(v)
			if !have {
				cur.onStack = false // an optimized-out part
			}
			out = append(out, cur)
			cur, have = piece{size: -1}, false
		case op == opStackValue:
			return nil // a computed value, in no memory
		default:
			return out // an operation this reader does not know: stop here
		}
	}
	if have {
		out = append(out, cur)
	}
	return out
}

// sleb128 decodes a signed LEB128 number, returning it and its length (0
// if b ends first).
func sleb128(b []byte) (int64, int) {
	var v int64
	var shift uint
	for i, c := range b {
		if shift < 64 {
			v |= int64(c&0x7f) << shift
		}
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return v, i + 1
		}
	}
	return 0, 0
}

// location returns the location expression of v at the link-time pc; nil
// where v has none there.
func (d *dwarfInfo) location(v *dvar, fn dfunc, pc uint64) []byte {
	if !v.hasList {
		return v.loc
	}
	if v.list < 0 || v.list >= int64(len(d.loclists)) {
		return nil
	}
	if d.dwarf5 {
		return d.locList5(v.list, fn, pc)
	}
	return d.locList4(v.list, fn, pc)
}

// locList5 walks a DWARF 5 location list (.debug_loclists).
func (d *dwarfInfo) locList5(off int64, fn dfunc, pc uint64) []byte {
	buf := d.loclists
	i := int(off)
	base := fn.lowpc
	uv := func() (uint64, bool) {
		v, n := binary.Uvarint(buf[i:])
		if n <= 0 {
			return 0, false
		}
		i += n
		return v, true
	}
	expr := func() ([]byte, bool) {
		n, ok := uv()
		if !ok || n > uint64(len(buf)-i) {
			return nil, false
		}
		e := buf[i : i+int(n)]
		i += int(n)
		return e, true
	}
	for i < len(buf) {
		kind := buf[i]
		i++
		switch kind {
		case 0x00: // DW_LLE_end_of_list
			return nil
		case 0x01: // DW_LLE_base_addressx
			idx, ok := uv()
			if !ok {
				return nil
			}
			a, ok := d.addrx(fn.addrBase, idx)
			if !ok {
				return nil
			}
			base = a
		case 0x02, 0x03: // DW_LLE_startx_endx, DW_LLE_startx_length
			si, ok1 := uv()
			second, ok2 := uv()
			if !ok1 || !ok2 {
				return nil
			}
			start, ok := d.addrx(fn.addrBase, si)
			if !ok {
				return nil
			}
			end := start + second
			if kind == 0x02 {
				end, ok = d.addrx(fn.addrBase, second)
				if !ok {
					return nil
				}
			}
			e, ok := expr()
			if !ok {
				return nil
			}
			if start <= pc && pc < end {
				return e
			}
		case 0x04: // DW_LLE_offset_pair
			s, ok1 := uv()
			en, ok2 := uv()
			e, ok3 := expr()
			if !ok1 || !ok2 || !ok3 {
				return nil
			}
			if base+s <= pc && pc < base+en {
				return e
			}
		case 0x05: // DW_LLE_default_location
			e, ok := expr()
			if !ok {
				return nil
			}
			return e
		case 0x06: // DW_LLE_base_address
			if i+8 > len(buf) {
				return nil
			}
			base = binary.LittleEndian.Uint64(buf[i:])
			i += 8
		case 0x07, 0x08: // DW_LLE_start_end, DW_LLE_start_length
			if i+8 > len(buf) {
				return nil
			}
			start := binary.LittleEndian.Uint64(buf[i:])
			i += 8
			var end uint64
			if kind == 0x07 {
				if i+8 > len(buf) {
					return nil
				}
				end = binary.LittleEndian.Uint64(buf[i:])
				i += 8
			} else {
				n, ok := uv()
				if !ok {
					return nil
				}
				end = start + n
			}
			e, ok := expr()
			if !ok {
				return nil
			}
			if start <= pc && pc < end {
				return e
			}
		default:
			return nil
		}
	}
	return nil
}

// locList4 walks a DWARF 4 location list (.debug_loc), whose addresses are
// relative to the unit's base; Go's lists start with a base selection.
func (d *dwarfInfo) locList4(off int64, fn dfunc, pc uint64) []byte {
	buf := d.loclists
	base := uint64(0)
	for i := int(off); i+16 <= len(buf); {
		start := binary.LittleEndian.Uint64(buf[i:])
		end := binary.LittleEndian.Uint64(buf[i+8:])
		i += 16
		switch {
		case start == 0 && end == 0:
			return nil
		case start == ^uint64(0):
			base = end
			continue
		}
		if i+2 > len(buf) {
			return nil
		}
		n := int(binary.LittleEndian.Uint16(buf[i:]))
		i += 2
		if i+n > len(buf) {
			return nil
		}
		if base+start <= pc && pc < base+end {
			return buf[i : i+n]
		}
		i += n
	}
	return nil
}

// addrx reads entry idx of the .debug_addr table at base.
func (d *dwarfInfo) addrx(base, idx uint64) (uint64, bool) {
	at := base + idx*8
	if at+8 > uint64(len(d.addr)) {
		return 0, false
	}
	return binary.LittleEndian.Uint64(d.addr[at:]), true
}
