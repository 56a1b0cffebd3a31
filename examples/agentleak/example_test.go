package main

import (
	"bytes"
	"context"
	"fmt"
	"path"
)

// The leaky loop, as the tests drive it: the watcher names the mask line
// after a few requests, and the mask builder has seen it rebuild masks.
func Example() {
	o, err := parseFlags([]string{"-requests", "16", "-profile", ""}, &bytes.Buffer{})
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := newSession(o)
	if err != nil {
		fmt.Println(err)
		return
	}
	res := s.serve(context.Background(), newProgress(&bytes.Buffer{}, false, o.requests))
	fmt.Println("served", res.served, "requests")
	fmt.Println("leak suspect after", s.suspectAt, "requests:", path.Base(s.firstSuspect.Site.Location().Function))
	fmt.Println("masks rebuilt:", s.rebuilds())
	if err := s.close(); err != nil {
		fmt.Println(err)
	}
	// Output:
	// served 16 requests
	// leak suspect after 6 requests: agentleak.(*agent).decodeLeaky
	// masks rebuilt: 368
}
