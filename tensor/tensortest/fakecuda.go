package tensortest

import (
	"fmt"
	"os"
	"strconv"
	"testing"
)

// FakeCUDAEnv is the variable that gives the fake CUDA driver
// (scripts/fakecuda.sh) its device count. CI sets it where it runs the CUDA
// tests on that driver, so its presence says a device must be there.
const FakeCUDAEnv = "TENSORLIFE_FAKECUDA_DEVICES"

// FakeCUDADevices returns how many devices the environment configures the
// fake CUDA driver with (FakeCUDAEnv), or 0 where it does not: unset, "0",
// or a value the driver refuses, for which its cuInit fails on its own.
func FakeCUDADevices() int {
	n, err := strconv.Atoi(os.Getenv(FakeCUDAEnv))
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// NoDevice ends a test that could not open CUDA device ordinal, saying why
// (format and args). On a machine without that device it skips, as every
// CUDA test does where there is no GPU. Where the environment configures
// the fake driver with the device (ordinal < FakeCUDADevices()), it fails
// instead: the device should be there, and a CI run whose driver did not
// come up would otherwise pass with every CUDA test skipped.
func NoDevice(tb testing.TB, ordinal int, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	if n := FakeCUDADevices(); ordinal < n {
		tb.Fatalf("%s; %s=%d configures the fake driver with cuda:%d, so it must open", msg, FakeCUDAEnv, n, ordinal)
		return
	}
	tb.Skip(msg)
}

// NotFakeDriver ends a test that runs on the fake driver only and found
// another driver, named by the device name it reported. It skips on a
// real GPU; where the environment configures the fake driver it fails,
// since the driver loaded is not the one configured (LD_LIBRARY_PATH does
// not lead to scripts/fakecuda.sh's library first).
func NotFakeDriver(tb testing.TB, deviceName string) {
	tb.Helper()
	if n := FakeCUDADevices(); n > 0 {
		tb.Fatalf("%s=%d configures the fake driver, but the driver loaded names its device %q: "+
			"put the directory scripts/fakecuda.sh prints first on LD_LIBRARY_PATH", FakeCUDAEnv, n, deviceName)
		return
	}
	tb.Skipf("runs on the fake driver only (scripts/fakecuda.sh), not on %q", deviceName)
}
