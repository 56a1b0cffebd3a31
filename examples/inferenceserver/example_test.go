package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
)

// Example serves one request on a loopback port and shuts down: the
// request's KV cache, logits and mask are freed, the prompt's mask stays in
// the cache until shutdown closes it, and nothing is left live.
func Example() {
	fmt.Print(serveOnce(false, "prompt=32&tokens=8"))
	// Output:
	// {"request":"<id>","mode":"fixed","prompt":32,"tokens":8,"batch":1}
	// shutdown: <nil>
}

// Example_leak serves the same request with the leak injected: every
// decode step's mask is still live at shutdown, and the report names the
// line that made them.
func Example_leak() {
	fmt.Print(serveOnce(true, "prompt=32&tokens=8"))
	// Output:
	// {"request":"<id>","mode":"leak","prompt":32,"tokens":8,"batch":1}
	// shutdown: 8 tensors (1.1 KiB) still live at shutdown, at:
	//   1. 1.1 KiB in 8 tensors: inferenceserver.(*server).decodeLeaky
}

// serveOnce runs a server for one request and returns the answer and the
// first lines of the shutdown error.
func serveOnce(leak bool, query string) string {
	cfg := defaultConfig()
	cfg.leak = leak
	s, err := newServer(cfg, slog.New(slog.DiscardHandler), io.Discard)
	if err != nil {
		return err.Error()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err.Error()
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln, nil) }()

	var b strings.Builder
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	if resp, err := client.Post("http://"+ln.Addr().String()+"/generate?"+query, "", nil); err != nil {
		b.WriteString(err.Error() + "\n")
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// The id is random: print it as <id>.
		b.WriteString(strings.ReplaceAll(string(body), resp.Header.Get("X-Request-Id"), "<id>"))
	}
	err = s.Shutdown(context.Background())
	<-served
	// Under go test the package's functions are named by import path.
	report := strings.ReplaceAll(fmt.Sprint(err), "github.com/tensorlife/tensorlife/examples/", "")
	lines := strings.SplitN(report, "\n", 3)
	lines = lines[:min(2, len(lines))]
	fmt.Fprintf(&b, "shutdown: %s\n", strings.Join(lines, "\n"))
	return b.String()
}
