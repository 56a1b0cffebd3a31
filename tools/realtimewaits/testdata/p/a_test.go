// A sample for realtimewaits' test: each line it must report says "flagged".
package p

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

type T struct{}

func (T) wait()  { <-time.After(time.Second) } // in bubble only: ok
func (T) wait2() { <-time.After(time.Second) } // used outside: flagged

func helper() { time.Sleep(1) } // only in bubble: ok

func TestX(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var x T
		x.wait()
		helper()
		go func() { time.Sleep(1) }()
	})
	var y T
	y.wait2()
	done := make(chan int)
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("hang")
	}
	local := func() { <-time.After(1) } // flagged: local is called outside a bubble
	local()
	for range 3 {
		require.Eventually(t, func() bool { return true }, time.Second, time.Millisecond) // flagged
	}
	require.Eventually(t, func() bool { return true }, time.Second, time.Millisecond) // not flagged
	//realtime:ok a probe of another process
	tk := time.NewTicker(1)
	tk.Stop()
	tk2 := time.NewTicker(1) // flagged
	tk2.Stop()
}
