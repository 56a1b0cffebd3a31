package main

import (
	"bytes"
	"fmt"
	"path"
	"strings"
)

// The adopted buffers a request forgets are named at the line that adopted
// them, like any tensor's.
func Example() {
	var out bytes.Buffer
	if err := run([]string{"-requests", "16"}, &out); err != nil {
		fmt.Println(err)
		return
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "the watcher named ") {
			fn := path.Base(strings.Fields(strings.TrimPrefix(line, "the watcher named "))[0])
			// A test binary names package main by its import path: print
			// what follows the package.
			_, method, _ := strings.Cut(fn, ".")
			fmt.Println("leak named at", method)
		}
	}
	// Output: leak named at (*session).adoptOutput
}
