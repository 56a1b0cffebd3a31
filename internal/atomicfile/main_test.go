package atomicfile_test

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/tensorlife/tensorlife/internal/atomicfile"
)

// writerEnv makes the test binary a writer (see startWriter): it writes
// writerBytes to the file the variable names, says "writing" on its
// standard output and waits in the middle of the write until its standard
// input closes or it is killed.
const writerEnv = "ATOMICFILE_TEST_WRITER"

// writerBytes is about what an out-of-memory dump's profile weighs, more
// than the writer's buffer, so part of it is on disk.
const writerBytes = 1536 << 10

func TestMain(m *testing.M) {
	if path := os.Getenv(writerEnv); path != "" {
		_ = atomicfile.Write(path, func(w io.Writer) error {
			if _, err := io.WriteString(w, strings.Repeat("x", writerBytes)); err != nil {
				return err
			}
			if _, err := os.Stdout.WriteString("writing\n"); err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, os.Stdin) // until the parent lets go, or kills
			return io.ErrUnexpectedEOF           // never rename: the write was cut short
		})
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func writeString(s string) func(io.Writer) error {
	return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
}
