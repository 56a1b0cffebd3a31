//go:build cuda

package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The whole program on GPU 0: the leak is found the same way as on the host
// device, the fix leaves nothing live, and the budget runs out naming the
// mask line. CI runs it on the fake driver (scripts/fakecuda.sh).
func TestOnCUDA(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    []string
		stopped bool // the run stops early on out-of-memory: an error
	}{
		{"leaky", nil, []string{"leak suspect after", maskFunc, "cuda:0"}, false},
		{"fixed", []string{"-fixed"}, []string{"no leak suspect", "cuda:0"}, false},
		{"oom", []string{"-requests", "2000", "-budget", "2097152"}, []string{"out of memory on cuda:0", maskFunc}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			dir := t.TempDir()
			args := append([]string{"-device", "cuda:0", "-profile", filepath.Join(dir, "tensors.pb.gz"),
				"-oom-dir", filepath.Join(dir, "oom")}, tc.args...)
			err := run(context.Background(), args, &out, false)
			if tc.stopped {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			for _, w := range tc.want {
				assert.Contains(t, out.String(), w)
			}
			if t.Failed() {
				t.Log(out.String())
			}
		})
	}
}
