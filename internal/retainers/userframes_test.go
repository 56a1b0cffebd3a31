package retainers

import (
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A goroutine blocked in the runtime or in package sync holds what its own
// code holds: the path to it names the first frame of that code and its
// local, never runtime.selectgo's or sync.Mutex's. A method value holds its
// receiver: the path names the receiver's field.

type worker struct {
	name  string
	items []*item
}

//go:noinline
func (w *worker) run() int { return len(w.items) }

type valueWorker struct {
	n   int
	its [2]*item
}

//go:noinline
func (v valueWorker) run() int { return v.n }

var (
	scenarioHandlers []func() int
	blockedStop      chan struct{}
	blockedNever     chan *item
	blockedMu        sync.Mutex

	selectItem, recvItem, mutexItem, methodItem, valueMethodItem weak.Pointer[item]
	blockedOnce                                                  sync.Once
)

//go:noinline
func selectWaiter(ready chan<- struct{}) {
	it := &item{21, 21}
	selectItem = weak.Make(it)
	ready <- struct{}{}
	select {
	case x := <-blockedNever:
		_ = x
	case <-blockedStop:
	}
	runtime.KeepAlive(it)
}

//go:noinline
func recvWaiter(ready chan<- struct{}) {
	it := &item{22, 22}
	recvItem = weak.Make(it)
	ready <- struct{}{}
	x := <-blockedNever // the runtime's frames point at x, in this frame
	_ = x
	runtime.KeepAlive(it)
}

//go:noinline
func mutexWaiter(ready chan<- struct{}) {
	it := &item{23, 23}
	mutexItem = weak.Make(it)
	ready <- struct{}{}
	blockedMu.Lock()
	//lint:ignore SA2001 the goroutine must block in sync.Mutex.Lock; the wait is the point, not the section
	blockedMu.Unlock()
	runtime.KeepAlive(it)
}

//go:noinline
func startBlocked() {
	blockedStop = make(chan struct{})
	blockedNever = make(chan *item)
	blockedMu.Lock()
	ready := make(chan struct{})
	go selectWaiter(ready)
	<-ready
	go recvWaiter(ready)
	<-ready
	go mutexWaiter(ready)
	<-ready
	w := &worker{name: "w", items: []*item{{24, 0}, {24, 1}}}
	methodItem = weak.Make(w.items[1])
	v := valueWorker{n: 2, its: [2]*item{{25, 0}, {25, 1}}}
	valueMethodItem = weak.Make(v.its[1])
	scenarioHandlers = append(scenarioHandlers, w.run, v.run)
}

// waitBlocked waits until the three goroutines are parked where their
// scenarios say.
func waitBlocked(t *testing.T) {
	t.Helper()
	parked := func(stacks, state, fn string) bool {
		for _, g := range strings.Split(stacks, "\n\n") {
			if strings.Contains(g, "["+state+"]:") && strings.Contains(g, "."+fn+"(") {
				return true
			}
		}
		return false
	}
	buf := make([]byte, 1<<20)
	for range 100000 {
		stacks := string(buf[:runtime.Stack(buf, true)])
		if parked(stacks, "select", "selectWaiter") && parked(stacks, "chan receive", "recvWaiter") &&
			parked(stacks, "sync.Mutex.Lock", "mutexWaiter") {
			return
		}
		runtime.Gosched()
	}
	t.Fatal("the blocked goroutines did not park")
}

//go:noinline
func findBlocked(cfg Config) (*Result, error) {
	return find([]any{selectItem.Value(), recvItem.Value(), mutexItem.Value(), methodItem.Value(),
		valueMethodItem.Value()}, cfg)
}

func TestFindNamesUserFramesOfBlockedGoroutines(t *testing.T) {
	if rerunWithSymbols(t) {
		return
	}
	blockedOnce.Do(startBlocked)
	waitBlocked(t)
	res, err := findBlocked(Config{})
	require.NoError(t, err)
	frame := func(state, fn string) string {
		return `^goroutine \d+ \[` + regexp.QuoteMeta(state) + `\], created by ` + regexp.QuoteMeta(pkg) +
			`startBlocked at userframes_test.go:\d+: frame ` + regexp.QuoteMeta(pkg+fn) +
			` \(userframes_test.go:\d+\), local it   \(\*retainers.item\)$`
	}
	for i, want := range []string{frame("select", "selectWaiter"), frame("chan receive", "recvWaiter"),
		frame("sync.Mutex.Lock", "mutexWaiter")} {
		require.True(t, res.Found[i], "%d", i)
		assert.Regexp(t, want, res.Paths[i].String())
		assert.Equal(t, Goroutine, res.Paths[i].Kind)
	}
	require.True(t, res.Found[3])
	assert.Equal(t, "package var "+pkg+"scenarioHandlers[0] → method value "+pkg+"(*worker).run, receiver w.items[1]"+
		"   ([]func() int)", res.Paths[3].String())
	require.True(t, res.Found[4])
	assert.Equal(t, "package var "+pkg+"scenarioHandlers[1] → method value "+pkg+"valueWorker.run, receiver v.its[1]"+
		"   ([]func() int)", res.Paths[4].String())
}

// Without symbols or DWARF the paths still start at the user's frames, and
// a method value says it is one. (The line of a frame parked in an inlined
// call is then the inlined call's: only the DWARF has the caller's.)
func TestFindNamesUserFramesWithoutSymbols(t *testing.T) {
	blockedOnce.Do(startBlocked)
	waitBlocked(t)
	res, err := findBlocked(Config{noBinary: true})
	require.NoError(t, err)
	for i, fn := range []string{"selectWaiter", "recvWaiter", "mutexWaiter"} {
		require.True(t, res.Found[i], fn)
		assert.Contains(t, res.Paths[i].Root, ": frame "+pkg+fn+" (", fn)
		assert.NotContains(t, res.Paths[i].Root, "frame runtime.", fn)
	}
	require.True(t, res.Found[3])
	assert.Contains(t, res.Paths[3].Expr, " → method value "+pkg+"(*worker).run (16 B, receiver word +8)")
}

// blockedDump is a goroutine parked in select: runtime.selectgo's frame
// (sp 0x9000) points into main.loop's (sp 0x9100), whose word at +8 holds
// the target T, in a precise slot when precise is set.
func blockedDump(t *testing.T, precise bool) *heapDump {
	t.Helper()
	w := newDumpWriter()
	const T = 0x2000
	w.object(T, []uint64{1, 2})
	w.goroutine(7, "select", "runtime.selectgo", []uint64{0x9108, 0}, 0)
	w.int(tagStackFrame)
	w.int(0x9100) // sp
	w.int(1)      // depth
	w.int(0x9000) // child sp
	w.mem(words(0, T))
	w.int(0x402000) // entry
	w.int(0x402010) // pc
	w.int(0x402010)
	w.str("main.loop")
	if precise {
		w.fields(offsets([]int{1}))
	} else {
		w.fields(nil)
	}
	d, err := parseDump(w.bytes())
	require.NoError(t, err)
	return d
}

// TestBlockedGoroutineIsNamedByItsOwnFrame guards the naming of a goroutine
// parked in select against the runtime's frames: the path starts at the
// user's frame, by its precise slot when it has one, and by its own word
// when only selectgo's pointer reaches it, never at runtime.selectgo.
func TestBlockedGoroutineIsNamedByItsOwnFrame(t *testing.T) {
	for _, precise := range []bool{true, false} {
		d := blockedDump(t, precise)
		roots := d.roots(nil)
		require.NotEmpty(t, roots)
		if precise {
			assert.Equal(t, 1, roots[0].frame, "the user's frame's roots come first")
			assert.Equal(t, int64(-1), roots[0].via, "its own precise slot")
		}
		target := d.find(0x2000)
		s := d.search(roots, []int{target}, nil, 8, time.Time{})
		c, ok := s.pathTo(target)
		require.True(t, ok)
		n := &namer{d: d, bin: &binaryInfo{}, funcName: func(uint64) (string, uint64, bool) { return "", 0, false }}
		p := n.name(c)
		assert.Equal(t, Goroutine, p.Kind)
		assert.Contains(t, p.Root, ": frame main.loop (", "precise=%v", precise)
		assert.Contains(t, p.Root, ", stack slot sp+0x8", "precise=%v: the word of the user's frame", precise)
		assert.NotContains(t, p.String(), "selectgo", "precise=%v", precise)
	}
}

func TestBlockingFrames(t *testing.T) {
	for name, want := range map[string]bool{
		"runtime.selectgo":                 true,
		"runtime.gopark":                   true,
		"sync.(*Mutex).Lock":               true,
		"internal/sync.(*Mutex).lockSlow":  true,
		"sync.(*WaitGroup).Wait":           true,
		"internal/runtime/sys.GetCallerPC": true,
		"time.Sleep":                       true,
		"main.worker":                      false,
		"github.com/acme/sync.(*Pool).Get": false,
		"github.com/acme/runtime.Run":      false,
		"runtimex.Loop":                    false,
		pkg + "selectWaiter":               false,
	} {
		assert.Equal(t, want, blockingFrame(name), name)
	}
}
