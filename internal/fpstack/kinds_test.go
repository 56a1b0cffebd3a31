package fpstack_test

import (
	"errors"
	"reflect"
	"sync"

	"github.com/tensorlife/tensorlife/internal/fpstack"

	"github.com/tensorlife/tensorlife/internal/fpstack/internal/cgocallback"
)

// A frameKind is one way a Go call can sit on the stack. The differential
// test composes kinds into paths: each layer of a path makes the call of its
// kind, and the call lands in dispatch, which runs the next layer or, at
// the end of the path, captures the stack both ways.
type frameKind int

const (
	kindPlain          frameKind = iota // a call to a function that is not inlined
	kindInlined                         // a call inlined into dispatch
	kindInlinedTwice                    // an inlined call inside an inlined call
	kindClosure                         // a closure called through a func value
	kindInterface                       // a pointer method through an interface
	kindValueInterface                  // a value method through an interface: (*T).M wrapper
	kindEmbedded                        // a method promoted from an embedded field
	kindMethodValue                     // a method value: the T.M-fm wrapper
	kindGeneric                         // generic functions of two shapes
	kindGenericIface                    // a generic method through an interface
	kindGenericValue                    // a generic function used as a func value
	kindDefer                           // an open-coded deferred closure
	kindDeferLoop                       // a deferred closure run by runtime.deferreturn
	kindDeferCall                       // "defer f(x)": the deferwrap wrapper
	kindGoCall                          // "go f(x)" in a new goroutine: the gowrap wrapper
	kindGoClosure                       // "go func() {...}()" in a new goroutine
	kindPanicking                       // a deferred call while a panic unwinds
	kindRecovered                       // a deferred call after recover() returned
	kindAfterRecover                    // a deferred call run after another one recovered
	kindNilPanic                        // a recovered nil dereference: sigpanic
	kindRecursion                       // five frames of plain recursion
	kindOnce                            // sync.Once.Do: standard library frames
	kindReflect                         // reflect.Value.Call: assembly frames
	kindCgo                             // a Go callback called from C (cgo only)
	numKinds
)

var kindNames = [numKinds]string{
	"plain", "inlined", "inlined2", "closure", "iface", "valueiface", "embedded", "methodvalue",
	"generic", "genericiface", "genericvalue", "defer", "deferloop", "defercall", "gocall",
	"goclosure", "panicking", "recovered", "afterrecover", "nilpanic", "recursion", "once",
	"reflect", "cgo",
}

func (k frameKind) String() string { return kindNames[k] }

// available reports whether this build can make the call of kind k.
func (k frameKind) available() bool { return k != kindCgo || cgocallback.Available }

// A path is one generated stack and, once run, its two captures.
type path struct {
	kinds  []frameKind
	depth  int // buffer length of both captures
	walked []uintptr
	ok     bool
	called []uintptr
}

// dispatch runs layer i of p, or captures at the end of the path.
//
//go:noinline
func dispatch(p *path, i int) {
	if i == len(p.kinds) {
		p.capture()
		return
	}
	switch p.kinds[i] {
	case kindPlain:
		layerPlain(p, i)
	case kindInlined:
		layerInlined(p, i)
	case kindInlinedTwice:
		layerInlinedOuter(p, i)
	case kindClosure:
		layerClosure(p, i)
	case kindInterface:
		var s stepper = &ptrStepper{}
		s.Step(p, i)
	case kindValueInterface:
		var s stepper = valueStepper{}
		s.Step(p, i)
	case kindEmbedded:
		var s stepper = &embedding{}
		s.Step(p, i)
	case kindMethodValue:
		callStep((&ptrStepper{}).Step, p, i)
	case kindGeneric:
		if i%2 == 0 {
			layerGeneric(p, i, 1)
		} else {
			layerGeneric(p, i, "two")
		}
	case kindGenericIface:
		var s stepper = genericStepper[int]{}
		s.Step(p, i)
	case kindGenericValue:
		callStep(layerGeneric2[float64], p, i)
	case kindDefer:
		layerDefer(p, i)
	case kindDeferLoop:
		layerDeferLoop(p, i)
	case kindDeferCall:
		layerDeferCall(p, i)
	case kindGoCall:
		layerGoCall(p, i)
	case kindGoClosure:
		layerGoClosure(p, i)
	case kindPanicking:
		layerPanicking(p, i)
	case kindRecovered:
		layerRecovered(p, i)
	case kindAfterRecover:
		layerAfterRecover(p, i)
	case kindNilPanic:
		layerNilPanic(p, i, nil)
	case kindRecursion:
		layerRecursion(p, i, 5)
	case kindOnce:
		var once sync.Once
		once.Do(func() { dispatch(p, i+1) })
	case kindReflect:
		reflect.ValueOf(layerPlain).Call([]reflect.Value{reflect.ValueOf(p), reflect.ValueOf(i)})
	case kindCgo:
		cgocallback.Call(func() { dispatch(p, i+1) })
	}
}

// capture takes both captures with skip 1, so both start at the frame that
// called capture, at the same return address.
//
//go:noinline
func (p *path) capture() {
	p.walked = make([]uintptr, p.depth)
	p.called = make([]uintptr, p.depth)
	var n int
	n, p.ok = fpstack.Walk(1, p.walked)
	p.walked = p.walked[:n]
	p.called = p.called[:fpstack.Callers(1, p.called)]
}

//go:noinline
func layerPlain(p *path, i int) { dispatch(p, i+1) }

func layerInlined(p *path, i int) { dispatch(p, i+1) }

func layerInlinedOuter(p *path, i int) { layerInlinedInner(p, i) }

func layerInlinedInner(p *path, i int) { dispatch(p, i+1) }

//go:noinline
func layerClosure(p *path, i int) {
	next := i + 1
	callFunc(func() { dispatch(p, next) })
}

//go:noinline
func callFunc(f func()) { f() }

//go:noinline
func callStep(f func(*path, int), p *path, i int) { f(p, i) }

type stepper interface{ Step(p *path, i int) }

type ptrStepper struct{ _ int }

//go:noinline
func (*ptrStepper) Step(p *path, i int) { dispatch(p, i+1) }

type valueStepper struct{ _ [3]int }

//go:noinline
func (valueStepper) Step(p *path, i int) { dispatch(p, i+1) }

type embedding struct{ valueStepper }

type genericStepper[T any] struct{ _ T }

//go:noinline
func (genericStepper[T]) Step(p *path, i int) { dispatch(p, i+1) }

//go:noinline
func layerGeneric[T any](p *path, i int, _ T) { dispatch(p, i+1) }

//go:noinline
func layerGeneric2[T any](p *path, i int) { dispatch(p, i+1) }

//go:noinline
func layerDefer(p *path, i int) {
	defer func() { dispatch(p, i+1) }()
}

//go:noinline
func layerDeferLoop(p *path, i int) {
	for range 1 {
		defer func() { dispatch(p, i+1) }()
	}
}

//go:noinline
func layerDeferCall(p *path, i int) {
	defer dispatch(p, i+1)
}

//go:noinline
func layerGoCall(p *path, i int) {
	done := make(chan struct{})
	go dispatchAndClose(p, i+1, done)
	<-done
}

//go:noinline
func dispatchAndClose(p *path, i int, done chan struct{}) {
	defer close(done)
	dispatch(p, i)
}

//go:noinline
func layerGoClosure(p *path, i int) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		dispatch(p, i+1)
	}()
	<-done
}

var errLayer = errors.New("fpstack test: layer panic")

//go:noinline
func layerPanicking(p *path, i int) {
	defer func() { _ = recover() }()
	defer func() { dispatch(p, i+1) }() // runs while the panic unwinds
	panic(errLayer)
}

//go:noinline
func layerRecovered(p *path, i int) {
	defer func() {
		if recover() != nil {
			dispatch(p, i+1)
		}
	}()
	panic(errLayer)
}

//go:noinline
func layerAfterRecover(p *path, i int) {
	defer func() { dispatch(p, i+1) }() // runs after the next one recovered
	defer func() { _ = recover() }()
	panic(errLayer)
}

//go:noinline
func layerNilPanic(p *path, i int, nilPtr *int) {
	defer func() {
		if recover() != nil {
			dispatch(p, i+1)
		}
	}()
	*nilPtr = i
}

//go:noinline
func layerRecursion(p *path, i, n int) {
	if n == 0 {
		dispatch(p, i+1)
		return
	}
	layerRecursion(p, i, n-1)
}
