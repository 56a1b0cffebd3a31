package fpstack

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEnvVar runs this test binary again with EnvVar set, since the
// variable is read once, at start-up.
func TestEnvVar(t *testing.T) {
	for _, tc := range []struct {
		value   string
		enabled bool
	}{
		{"callers", false},
		{"fp", supported},
		{"", supported},
		{"anything else", supported},
	} {
		t.Run(fmt.Sprintf("%q", tc.value), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestEnvVarChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), EnvVar+"="+tc.value, "FPSTACK_ENV_CHILD=1")
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			assert.Contains(t, string(out), fmt.Sprintf("enabled=%v\n", tc.enabled))
		})
	}
}

// TestEnvVarChild reports Enabled to TestEnvVar from the child process.
func TestEnvVarChild(t *testing.T) {
	if os.Getenv("FPSTACK_ENV_CHILD") != "1" {
		t.Skip("run by TestEnvVar in a child process")
	}
	fmt.Printf("enabled=%v\n", Enabled())
}
