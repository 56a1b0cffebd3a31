package gomlxtrack

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/tensorlife/tensorlife/track"
)

// Kinds of the records a wrapped backend makes (track.Meta.Kind).
const (
	// KindBuffer is the kind of a buffer's record.
	KindBuffer = "gomlx"
	// KindProgram is the kind of a compiled program's record.
	KindProgram = "gomlx.program"
)

// adapterPackages are the packages a wrapped backend records through: GoMLX
// (with go-xla) and this adapter. A site names the first frame outside them.
var adapterPackages = sync.OnceValue(func() error {
	return track.AdapterPackages("github.com/gomlx/", "github.com/tensorlife/tensorlife/contrib/gomlxtrack.")
})

// backend is a GoMLX backend whose buffers and programs are tracked. The
// methods it does not name pass through to the backend it wraps.
type backend struct {
	backends.Backend // the wrapped backend

	tr       *track.Tracker
	name     string
	devices  []string     // the device names of the records, by DeviceNum
	programs *track.Owner // holds the compiled programs
	live     liveSet      // what Finalize releases
	done     atomic.Bool  // Finalize was called
	// execSites caches, per site of the tracker (MaxSites bounds them),
	// whether its stack runs through Exec.
	execSites sync.Map // *track.Site -> bool
}

// Wrap returns b with every buffer it makes tracked in tr, as a tensor of
// its real size (shape × dtype) whose site is the first frame outside GoMLX
// and this package: buffers from flat data, shared buffers, copies to
// another device and an executable's outputs. BufferFinalize releases the
// buffer's record; an input donated to an execution is released once, when
// the execution takes it, and the buffer the backend reuses for an output
// is booked again as that output; a buffer dropped without BufferFinalize
// (GoMLX's tensors have no finalizer) is reported dropped by tr and, when tr
// reclaims leaks (track.ReclaimLeaks), finalized. Its compiled programs are
// booked too (see the package doc). A buffer Wrap did not make gets an
// error matching ErrForeignBuffer, never a panic.
//
// Wrap returns b itself when b is nil, already tracked by tr, or tr is nil
// (untracked, as a nil tracker means to tensor.NewDeviceAllocator); a
// backend tracked by another tracker is wrapped again, and counts in both.
// The result is safe for concurrent use as b is.
func Wrap(b backends.Backend, tr *track.Tracker) backends.Backend {
	if b == nil || tr == nil {
		return b
	}
	if w, ok := b.(*backend); ok && w.tr == tr {
		return w
	}
	_ = adapterPackages() // fixed, valid prefixes: no error to hand on
	name := shortName(b.Name())
	w := &backend{
		Backend:  b,
		tr:       tr,
		name:     name,
		programs: &track.Owner{Name: "gomlx programs (" + name + ")"},
	}
	n := max(1, min(b.NumDevices(), 64))
	for i := range n {
		w.devices = append(w.devices, name+":"+strconv.Itoa(i))
	}
	return w
}

// shortName is a backend's name as GoMLX registers it: the pure-Go
// backend calls itself "SimpleGo (go)", registered as "go".
func shortName(name string) string {
	if i := strings.LastIndex(name, " ("); i >= 0 && strings.HasSuffix(name, ")") {
		return name[i+2 : len(name)-1]
	}
	return name
}

// deviceName is the records' device name of device d.
func (b *backend) deviceName(d backends.DeviceNum) string {
	if int(d) >= 0 && int(d) < len(b.devices) {
		return b.devices[d]
	}
	return b.name + ":" + strconv.Itoa(int(d))
}

// meta is the record metadata of a buffer of shape on device d.
func (b *backend) meta(shape shapes.Shape, d backends.DeviceNum) (*track.Meta, int64) {
	return track.InternMeta(KindBuffer, b.deviceName(d), dtypeName(shape.DType), shape.Dimensions),
		int64(shape.Memory())
}

// dtypeNames are GoMLX's dtype names in lower case, as tensorlife writes
// its own ("Float32" is "float32").
var dtypeNames sync.Map // dtypes.DType -> string

func dtypeName(d dtypes.DType) string {
	if v, ok := dtypeNames.Load(d); ok {
		return v.(string)
	}
	name := strings.ToLower(d.String())
	dtypeNames.Store(d, name)
	return name
}

// buffer is what a wrapped backend hands GoMLX for a buffer of the backend
// it wraps. GoMLX holds it alone (a tensors.Tensor's on-device storage), so
// the collector finding it unreachable is the tensor being dropped: its
// cleanup reports the slot's record dropped. It carries its backend, which
// own checks, and the wrapped buffer, which also keeps it in a 32-byte size
// class: the runtime finds a cleanup's place by walking its span's list, so
// fewer objects a span make AddCleanup cheaper (8-byte handles cost it
// about twice as much).
type buffer struct {
	b     *backend
	inner backends.Buffer // the wrapped backend's, as s holds it
	s     *slot
}

// newBuffer books inner, a buffer the wrapped backend just made, under ctx,
// with the stack from skip frames above its caller.
//
//go:noinline
func (b *backend) newBuffer(ctx context.Context, inner backends.Buffer, skip int) (*buffer, error) {
	s, err := b.newSlot(inner)
	if err != nil {
		return nil, err
	}
	if err := b.tr.Books().Record(ctx, &s.own, skip+1); err != nil {
		return nil, err // only a misuse of a fresh record: never
	}
	return b.hold(s, &s.own), nil
}

// newBufferAt books inner at site: under ctx, or, with a pending record,
// for Exec to book (rebook).
func (b *backend) newBufferAt(ctx context.Context, inner backends.Buffer, site *track.Site, later bool) (*buffer, error) {
	s, err := b.newSlot(inner)
	if err != nil {
		return nil, err
	}
	if later {
		s.site = site
		return b.hold(s, pending), nil
	}
	if err := b.tr.Books().RecordAt(ctx, &s.own, site); err != nil {
		return nil, err // only a misuse of a fresh record: never
	}
	return b.hold(s, &s.own), nil
}

// newSlot is the slot of inner, its record filled but not made.
func (b *backend) newSlot(inner backends.Buffer) (*slot, error) {
	shape, err := b.Backend.BufferShape(inner)
	if err != nil {
		return nil, err
	}
	dev, err := b.Backend.BufferDeviceNum(inner)
	if err != nil {
		return nil, err
	}
	s := &slot{b: b, inner: inner}
	s.own.Meta, s.own.Bytes = b.meta(shape, dev)
	return s, nil
}

// hold makes the buffer GoMLX holds of s, whose record is r, and watches it.
func (b *backend) hold(s *slot, r *track.Record) *buffer {
	s.rec.Store(r)
	if r != pending {
		b.live.add(s)
	}
	buf := &buffer{b: b, inner: s.inner, s: s}
	addCleanup(buf, s)
	return buf
}

// underExec reports whether site's stack runs through Exec, which books the
// outputs made there under its context: symbolized once per site.
func (b *backend) underExec(site *track.Site) bool {
	if v, ok := b.execSites.Load(site); ok {
		return v.(bool)
	}
	found := false
	for _, f := range site.Frames() {
		if f.Function == execFunction {
			found = true
			break
		}
	}
	b.execSites.Store(site, found)
	return found
}

// execFunction is Exec's name in a stack.
const execFunction = "github.com/tensorlife/tensorlife/contrib/gomlxtrack.Exec"

// own returns the slot of a buffer of b, or a *ForeignBufferError.
func (b *backend) own(buf backends.Buffer, method string) (*slot, error) {
	if w, ok := buf.(*buffer); ok && w != nil && w.b == b {
		return w.s, nil
	}
	return nil, &ForeignBufferError{Backend: b.name, Method: method, Type: fmt.Sprintf("%T", buf)}
}

// live returns the slot of a buffer of b that is not finalized.
func (b *backend) liveSlot(buf backends.Buffer, method string) (*slot, error) {
	s, err := b.own(buf, method)
	if err != nil {
		return nil, err
	}
	if s.rec.Load() == nil {
		return nil, fmt.Errorf("%w: %s.%s of a %s buffer", ErrFinalized, b.name, method, s.describe())
	}
	return s, nil
}

// BufferFinalize releases the buffer's record and finalizes it in the
// wrapped backend. A second finalize (or one after donation) is an error
// matching ErrFinalized, noted on the tracker as a double free.
func (b *backend) BufferFinalize(buf backends.Buffer) error {
	s, err := b.own(buf, "BufferFinalize")
	if err != nil {
		return err
	}
	r := s.take()
	if r == nil {
		if gone := s.gone.Load(); gone != nil && !b.done.Load() {
			gone.NoteMisuse(track.Misuse{Kind: track.EventDoubleFree, SecondFree: b.tr.Books().CallerSite(1)})
		}
		return fmt.Errorf("%w: BufferFinalize of a %s buffer", ErrFinalized, s.describe())
	}
	err = b.Backend.BufferFinalize(s.inner)
	s.release(r)
	return err
}

// BufferShape returns the buffer's shape.
func (b *backend) BufferShape(buf backends.Buffer) (shapes.Shape, error) {
	s, err := b.own(buf, "BufferShape")
	if err != nil {
		return shapes.Invalid(), err
	}
	return b.Backend.BufferShape(s.inner)
}

// BufferDeviceNum returns the buffer's device.
func (b *backend) BufferDeviceNum(buf backends.Buffer) (backends.DeviceNum, error) {
	s, err := b.own(buf, "BufferDeviceNum")
	if err != nil {
		return 0, err
	}
	return b.Backend.BufferDeviceNum(s.inner)
}

// BufferToFlatData copies the buffer to flat.
func (b *backend) BufferToFlatData(buf backends.Buffer, flat any) error {
	s, err := b.liveSlot(buf, "BufferToFlatData")
	if err != nil {
		return err
	}
	return b.Backend.BufferToFlatData(s.inner, flat)
}

// BufferFromFlatData makes a tracked buffer from flat.
//
//go:noinline
func (b *backend) BufferFromFlatData(d backends.DeviceNum, flat any, shape shapes.Shape) (backends.Buffer, error) {
	inner, err := b.Backend.BufferFromFlatData(d, flat, shape)
	if err != nil {
		return nil, err
	}
	return b.newBuffer(context.Background(), inner, 1)
}

// NewSharedBuffer makes a tracked shared buffer.
//
//go:noinline
func (b *backend) NewSharedBuffer(d backends.DeviceNum, shape shapes.Shape) (backends.Buffer, any, error) {
	inner, flat, err := b.Backend.NewSharedBuffer(d, shape)
	if err != nil {
		return nil, nil, err
	}
	buf, err := b.newBuffer(context.Background(), inner, 1)
	if err != nil {
		return nil, nil, err
	}
	return buf, flat, nil
}

// BufferData returns the shared buffer's storage.
func (b *backend) BufferData(buf backends.Buffer) (any, error) {
	s, err := b.liveSlot(buf, "BufferData")
	if err != nil {
		return nil, err
	}
	return b.Backend.BufferData(s.inner)
}

// BufferCopyToDevice copies the buffer to device d: a tracked buffer.
//
//go:noinline
func (b *backend) BufferCopyToDevice(buf backends.Buffer, d backends.DeviceNum) (backends.Buffer, error) {
	s, err := b.liveSlot(buf, "BufferCopyToDevice")
	if err != nil {
		return nil, err
	}
	inner, err := b.Backend.BufferCopyToDevice(s.inner, d)
	if err != nil {
		return nil, err
	}
	return b.newBuffer(context.Background(), inner, 1)
}

// Builder returns a builder whose compiled programs are tracked.
func (b *backend) Builder(name string) backends.Builder {
	return &builder{Builder: b.Backend.Builder(name), b: b}
}

// Finalize releases the record of every buffer and program of b still
// live, and finalizes the wrapped backend, which frees them.
func (b *backend) Finalize() {
	if !b.done.Swap(true) {
		b.live.releaseAll()
	}
	b.Backend.Finalize()
}
