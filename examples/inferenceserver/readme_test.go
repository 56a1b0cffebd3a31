package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
)

// errorsLog keeps the errors the server logs, by message, beside its
// text log.
type errorsLog struct {
	slog.Handler
	mu   sync.Mutex
	errs map[string][]error
}

func (h *errorsLog) Handle(ctx context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && a.Key == "err" {
			h.mu.Lock()
			h.errs[r.Message] = append(h.errs[r.Message], err)
			h.mu.Unlock()
		}
		return true
	})
	return h.Handler.Handle(ctx, r)
}

func (h *errorsLog) first(msg string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.errs[msg]) == 0 {
		return nil
	}
	return h.errs[msg][0]
}

// holdAt holds each request of a burst at decode step at until release
// is closed, and says on events when each one got there or ended: a test
// that sends the next request only after the last one's event runs the
// burst one request at a time, each holding its memory, so what runs out
// and what the error says is the same on every run.
type holdAt struct {
	at      int
	on      atomic.Bool // off for the warm-up request
	events  chan int    // at, or stepEnded
	release chan struct{}
}

func (h *holdAt) hook(ctx context.Context, step int) {
	if !h.on.Load() || step != h.at && step != stepEnded {
		return
	}
	h.events <- step
	if step == h.at {
		select {
		case <-h.release:
		case <-ctx.Done():
		}
	}
}

// requestID matches the server's request ids, random on every run.
var requestID = regexp.MustCompile(`\br[0-9a-f]{16}\b`)

// TestBurstErrorsNameTheRequests sends long prompts one after another,
// each held at step 448 (16 KV pages), until one does not get there: with
// admission off it runs out of memory mid-generation, and the error names
// the open requests that hold the memory, by route and id; with admission
// on the fifth is refused at admission. With -v it prints both errors,
// request ids as <id>: the README's inference-server section shows them.
func TestBurstErrorsNameTheRequests(t *testing.T) {
	for _, admission := range []bool{false, true} {
		h := &holdAt{at: 448, events: make(chan int), release: make(chan struct{})}
		logged := &errorsLog{errs: make(map[string][]error)}
		ts := startServerLogging(t, func(c *config) {
			burstConfig(admission)(c)
			c.hookStep = h.hook
		}, func(text slog.Handler) slog.Handler { logged.Handler = text; return logged })
		long := "prompt=512&tokens=512&batch=8"
		require.Equal(t, http.StatusOK, ts.generate(long).status) // warms the prompt-mask cache
		h.on.Store(true)

		var wg sync.WaitGroup
		out := make([]outcome, 16)
		held := 0
		for i := range out {
			wg.Go(func() { out[i] = ts.generate(long) })
			if <-h.events == stepEnded {
				break
			}
			held++
		}
		close(h.release)
		for range held {
			<-h.events // each held request ends
		}
		wg.Wait()
		if !admission {
			assert.Equal(t, 11, held, "11 requests at 16 pages fit the budget for 4 of the largest")
			err := logged.first("out of memory")
			var oom *tensor.OOMError
			require.ErrorAs(t, err, &oom)
			assert.Equal(t, held+1, oom.Requests.Count)
			text := err.Error()
			assert.Regexp(t, `^step \d+: `, text, "mid-generation")
			assert.Contains(t, text, "largest open requests")
			assert.Contains(t, text, `route="POST /generate"`)
			fmt.Printf("without -admission, the 12th long prompt:\n\n%s\n\n", requestID.ReplaceAllString(text, "<id>"))
			continue
		}
		assert.Equal(t, 4, held)
		err := logged.first("admission refused")
		require.ErrorIs(t, err, pool.ErrAdmissionRefused)
		assert.Nil(t, logged.first("out of memory"))
		fmt.Printf("with -admission, the 5th:\n\n%s\n", err)
	}
}
