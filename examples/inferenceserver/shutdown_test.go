package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track/tracktest"
)

// TestShutdownDrainsRequestsInFlight shuts the server down under load:
// every request it admitted completes, the rest are refused, and nothing
// is left live.
func TestShutdownDrainsRequestsInFlight(t *testing.T) {
	ts := startServer(t, nil)
	const n = 400
	done := make(chan []outcome, 1)
	go func() {
		done <- ts.load(n, 8, func(int) string { return "prompt=64&tokens=128&batch=4" })
	}()
	// Shut down once the load is well under way; if it finishes first, the
	// test still checks a clean shutdown.
	for deadline := time.Now().Add(10 * time.Second); ts.admitted.Load() < 40 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	require.NoError(t, ts.shutdown(t))
	outcomes := <-done

	served, refused := 0, 0
	for i, o := range outcomes {
		switch {
		case o.err != nil:
			refused++ // the listener was closed, or the connection with it
		case o.status == http.StatusOK:
			served++
		default:
			assert.Equal(t, http.StatusServiceUnavailable, o.status, "request %d: %s", i, o.body)
			assert.Contains(t, o.body, "shutting down")
			refused++
		}
	}
	t.Logf("%d requests served, %d refused", served, refused)
	assert.Equal(t, int(ts.admitted.Load()), served, "every admitted request completed")
	assert.GreaterOrEqual(t, served, 40)
	tracktest.VerifyNone(t, ts.tr)
	assert.Zero(t, ts.lanes[0].dev.Used())
}
