package retainers

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// busyModeEnv tells TestBusyChild what to do in the child process.
const busyModeEnv = "TENSORLIFE_RETAINERS_BUSY_MODE"

// syscallLoop reads one byte at a time from /dev/zero until stop is set:
// a goroutine forever entering and leaving system calls.
//
//go:noinline
func syscallLoop(fd int, stop *atomic.Bool, reads *atomic.Int64, wg *sync.WaitGroup) {
	defer wg.Done()
	var b [1]byte
	for !stop.Load() {
		_, _ = syscall.Read(fd, b[:])
		reads.Add(1)
	}
}

// startSyscallLoops starts n syscallLoops; the returned function stops
// them and waits for them to return.
func startSyscallLoops(t *testing.T, n int) (stop func()) {
	t.Helper()
	fd, err := syscall.Open("/dev/zero", syscall.O_RDONLY, 0)
	require.NoError(t, err)
	var flag atomic.Bool
	var reads atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go syscallLoop(fd, &flag, &reads, &wg)
	}
	for reads.Load() < 10_000 { // the loops are running, not only started
		runtime.Gosched()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			flag.Store(true)
			wg.Wait()
			_ = syscall.Close(fd)
		})
	}
}

// TestBusyChild is run by the tests below in a child process: should the
// guard miss, the dump's crash ends the child, not this test binary.
func TestBusyChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("run in a child process by the tests of goroutines busy in system calls")
	}
	stop := startSyscallLoops(t, 4)
	defer stop()
	switch mode := os.Getenv(busyModeEnv); mode {
	case "refuse":
		_, err := find([]any{&item{}}, Config{MaxWait: 100 * time.Millisecond})
		var busy *BusyError
		require.ErrorAs(t, err, &busy)
		assert.True(t, errors.Is(err, ErrBusy))
		assert.GreaterOrEqual(t, busy.Waited, 100*time.Millisecond)
		require.NotEmpty(t, busy.Goroutines)
		assert.Contains(t, strings.Join(busy.Goroutines, "\n"), pkg+"syscallLoop")
		fmt.Println("REFUSED:", err)
	case "settle":
		time.AfterFunc(50*time.Millisecond, stop)
		res, err := find([]any{&item{}}, Config{MaxWait: 10 * time.Second})
		require.NoError(t, err)
		fmt.Println("DUMPED after the goroutines stopped, in", res.Total)
	case "hazard":
		for i := range 500 {
			if _, err := find([]any{&item{}}, Config{unguarded: true}); err != nil {
				t.Fatal(err)
			}
			fmt.Println("dump", i+1)
		}
	default:
		t.Fatalf("unknown mode %q", mode)
	}
}

func TestFindRefusesGoroutinesBusyInSystemCalls(t *testing.T) {
	out, err := runChild(t, os.Args[0], "TestBusyChild", busyModeEnv+"=refuse")
	require.NoError(t, err, out)
	assert.Contains(t, out, "REFUSED: retainers: heap dump not written:", "the child said why, and did not crash")
	assert.NotContains(t, out, "bad status")
}

func TestFindWaitsForSystemCallsToSettle(t *testing.T) {
	out, err := runChild(t, os.Args[0], "TestBusyChild", busyModeEnv+"=settle")
	require.NoError(t, err, out)
	assert.Contains(t, out, "DUMPED after the goroutines stopped")
}

// TestUnguardedDumpCrashes shows the hazard the guard is for: without it,
// dumps taken while goroutines loop on system calls end the process on Go
// 1.26. It takes seconds of CPU, so it runs only when asked for with
// TENSORLIFE_RETAINERS_HAZARD=1.
func TestUnguardedDumpCrashes(t *testing.T) {
	if os.Getenv("TENSORLIFE_RETAINERS_HAZARD") != "1" {
		t.Skip("set TENSORLIFE_RETAINERS_HAZARD=1 to reproduce the crash the guard avoids")
	}
	out, err := runChild(t, os.Args[0], "TestBusyChild", busyModeEnv+"=hazard")
	require.Error(t, err, "500 unguarded dumps beside busy system calls did not crash:\n%s", out)
	assert.Contains(t, out, "dumpgs in STW - bad status")
	dumps := strings.Count(out, "\ndump ")
	t.Logf("the child crashed after %d dumps", dumps)
}

// os/signal's goroutine sits in a system call it leaves only when a signal
// arrives: it does not keep the dump from being written.
func TestFindLetsTheSignalGoroutineBe(t *testing.T) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR1)
	defer signal.Stop(ch)
	_, err := find([]any{&item{}}, Config{MaxWait: 50 * time.Millisecond})
	assert.NoError(t, err)
	assert.True(t, parked("os/signal.signal_recv\nos/signal.loop"))
	assert.False(t, parked("syscall.Syscall\nmain.spin"))
}

func TestParseTraceback(t *testing.T) {
	text := "goroutine 1 [running]:\nmain.main()\n\t/x/main.go:3 +0x1\n\n" +
		"goroutine 7 [syscall]:\nsyscall.Syscall(0x0, 0x3, 0xc000, 0x1)\n\t/go/syscall.go:9 +0x2\nmain.spin(...)\n\t/x/main.go:9\n\n" +
		"goroutine 9 [chan receive, 3 minutes]:\nmain.wait()\n\t/x/main.go:12 +0x3\n\n" +
		"goroutine 11 [sleep (leaked)]:\nmain.lost()\n\t/x/main.go:15 +0x3\n"
	gs := parseTraceback([]byte(text))
	require.Len(t, gs, 3, "the caller's own goroutine is left out")
	assert.Equal(t, goroutineSample{id: 7, state: "syscall", funcs: "syscall.Syscall\nmain.spin"}, gs[0])
	assert.Equal(t, "chan receive", gs[1].state)
	assert.True(t, gs[2].leaked)
	assert.True(t, inSyscallCode(gs[0].funcs))
	assert.Equal(t, "main.spin", userFrame(gs[0].funcs, "syscall.Syscall"))
}
