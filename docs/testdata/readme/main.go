// Command readme prints two outputs the README shows: a tracktest report
// of a View kept after its parent's Free (decode.go), and an out-of-memory
// error on a device that tensorlife shares with other allocators and with
// memory it does not hold (oom.go); and one whose budget three long prompts
// in flight hold, with the summary's open requests and request kinds
// (requests.go). docs/readme_output_test.go runs it and
// compares: go run ./docs/testdata/readme. It is under testdata, so
// go test ./... does not build it on its own.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := decode(); err != nil {
		fmt.Fprintln(os.Stderr, "readme:", err)
		os.Exit(1)
	}
	fmt.Println()
	if err := outOfMemory(); err != nil {
		fmt.Fprintln(os.Stderr, "readme:", err)
		os.Exit(1)
	}
	fmt.Println()
	if err := openRequests(); err != nil {
		fmt.Fprintln(os.Stderr, "readme:", err)
		os.Exit(1)
	}
}
