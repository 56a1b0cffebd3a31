package gomlxtrack

import (
	"context"
	"reflect"

	"github.com/gomlx/gomlx/backends"
	"github.com/tensorlife/tensorlife/track"
)

// builder is a wrapped backend's Builder: it passes every op through and
// counts the bytes of the constants it is given, which the compiled program
// keeps.
type builder struct {
	backends.Builder
	b          *backend
	constBytes int64
}

// Constant passes the constant on and counts its bytes.
func (x *builder) Constant(flat any, dims ...int) (backends.Op, error) {
	op, err := x.Builder.Constant(flat, dims...)
	if err == nil {
		if v := reflect.ValueOf(flat); v.Kind() == reflect.Slice {
			x.constBytes += int64(v.Len()) * int64(v.Type().Elem().Size())
		}
	}
	return op, err
}

// Compile compiles the program and books it: a record of kind KindProgram
// with the bytes of its constants, at the line whose call compiled it,
// handed to the backend's programs owner.
//
//go:noinline
func (x *builder) Compile(outputs []backends.Op, shardings []*backends.ShardingSpec) (backends.Executable, error) {
	inner, err := x.Builder.Compile(outputs, shardings)
	if err != nil {
		return nil, err
	}
	b := x.b
	s := &slot{b: b, program: inner}
	s.own.Bytes = x.constBytes
	s.own.Meta = track.InternMeta(KindProgram, b.deviceName(0), "", nil)
	if err := b.tr.Books().Record(context.Background(), &s.own, 1); err != nil {
		return nil, err // only a misuse of a fresh record: never
	}
	_ = s.own.HandOver(b.programs) // live and b's: no misuse
	s.rec.Store(&s.own)
	b.live.add(s)
	ex := &executable{Executable: inner, s: s}
	addCleanup(ex, s)
	return ex, nil
}

// executable is a wrapped backend's compiled program: it unwraps its
// inputs, releases the donated ones once, and books its outputs.
type executable struct {
	backends.Executable
	s *slot
}

// Finalize releases the program's record and finalizes it.
func (ex *executable) Finalize() {
	if r := ex.s.take(); r != nil {
		ex.s.release(r)
	}
	ex.Executable.Finalize()
}

// Execute runs the program on the wrapped backend's buffers of inputs. Each
// donated input's record is released once the program has taken it: the
// backend may reuse its memory for an output, which is booked as that
// output. Outputs are booked at the line that ran the program, on the
// calling goroutine, wherever the backend computed them.
//
//go:noinline
func (ex *executable) Execute(inputs []backends.Buffer, donate []bool, d backends.DeviceNum) ([]backends.Buffer, error) {
	b := ex.s.b
	// The caller's line, on the caller's goroutine, whichever goroutines
	// the backend computes on.
	site := b.tr.Books().CallerSite(1)
	raw := make([]backends.Buffer, len(inputs))
	var slotArr [8]*slot
	slots := slotArr[:0]
	for i, in := range inputs {
		s, err := b.liveSlot(in, "Execute")
		if err != nil {
			return nil, err
		}
		raw[i] = s.inner
		slots = append(slots, s)
	}
	outs, err := ex.Executable.Execute(raw, donate, d)
	if err != nil {
		return nil, err
	}
	for i, give := range donate {
		if give && i < len(slots) {
			if r := slots[i].take(); r != nil {
				slots[i].release(r) // the program took it: its memory is the backend's now
			}
		}
	}
	later := b.underExec(site)
	wrapped := make([]backends.Buffer, len(outs))
	for i, o := range outs {
		w, err := b.newBufferAt(context.Background(), o, site, later)
		if err != nil {
			return nil, err
		}
		wrapped[i] = w
	}
	return wrapped, nil
}
