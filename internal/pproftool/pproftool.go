// Package pproftool finds the go tool pprof binary for tests that run the
// real tool on tensorlife's profiles, as a person would.
package pproftool

import (
	"fmt"
	"os/exec"
	"strings"
	"sync"
)

// Path returns the path of the go tool pprof binary. `go tool -n pprof`
// prints it (building the tool into the cache if needed); it is asked once
// per process, so each run starts the binary directly instead of paying for
// `go tool` every time.
func Path() (string, error) { return path() }

var path = sync.OnceValues(func() (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", err
	}
	out, err := exec.Command(goBin, "tool", "-n", "pprof").Output()
	if err != nil {
		return "", fmt.Errorf("go tool -n pprof: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
})
