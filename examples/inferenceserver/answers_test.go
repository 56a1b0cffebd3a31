package main

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A client learns nothing of the server from a 200 answer: its id is
// random, not a count of the requests served, and the answer says nothing
// of the memory the server holds.
func TestAnswersSayNothingOfTheServer(t *testing.T) {
	for _, leak := range []bool{false, true} {
		s := newQuietServer(t, func(c *config) { c.leak = leak })
		h := s.Handler()
		idForm := regexp.MustCompile(`^r[0-9a-f]{16}$`)
		seen := map[string]bool{}
		for range 20 {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/generate?prompt=8&tokens=2", nil))
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			id := w.Header().Get("X-Request-Id")
			assert.Regexp(t, idForm, id)
			assert.False(t, seen[id], "ids do not repeat")
			seen[id] = true

			var body map[string]any
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
			assert.Equal(t, []string{"batch", "mode", "prompt", "request", "tokens"}, slices.Sorted(maps.Keys(body)),
				"no server-wide figure such as live_bytes")
			assert.Equal(t, id, body["request"])
		}
		for _, counted := range []string{"r1", "r2", "r20"} {
			assert.False(t, seen[counted])
		}
	}
}
