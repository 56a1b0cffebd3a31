package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tensorlife/tensorlife/tensor/devflag"
)

// errBadConfig means a flag value the server cannot run with.
var errBadConfig = errors.New("invalid configuration")

// config is what the server is built from: the command line, or a test's
// choice. parseFlags fills it and validate checks it, in one place.
type config struct {
	addr     string        // listen address
	leak     bool          // inject the seed's bug: a new mask per step, kept forever
	capacity int64         // host device bytes: the GPU the server pretends to have
	budget   int64         // pool budget bytes, checked before the device is asked
	cache    int64         // prompt-mask cache budget bytes
	drain    time.Duration // how long shutdown waits for requests in flight
	// watchAfter is how many requests are the growth watcher's warm-up
	// (watch.WarmUp): 0 by default, since memory in flight is never judged
	// and the prompt cache is handed to its bounded owner.
	watchAfter int

	// Bounds on one request's parameters: what the model serves.
	maxPrompt int
	maxTokens int
	maxBatch  int

	// device is -device: the host device (the zero value), cuda:N, on
	// which capacity caps the memory taken from the GPU, or several of them,
	// each with capacity, its own pool of budget and prompt cache of cache.
	device devflag.List

	// What clients can reach and how much of the budget they can hold.
	debugAddr   string // the debug listener (profiles, pprof, metrics); empty: none
	maxInFlight int    // /generate requests doing tensor work at once
	// admission admits each /generate request with a reservation of its
	// kind's p99 peak on its pool (pool.Pool.Admit), or of the largest
	// request while the kind has too little history: a request the
	// budget cannot hold is refused before it starts (503, Retry-After).
	admission bool
	// sized (with -admission, on by default) states each request's size
	// when it is admitted (pool.Pool.AdmitSized): its tokens, prompt plus
	// the most it may generate, times its batch, with the worst case of
	// that size as the fallback; its kind then reserves what its requests
	// of that size held. Off, each request reserves its kind's p99 peak.
	sized bool
	// overcommit skips the start-up check that the budget holds
	// maxInFlight of the largest request: for tests that show what
	// happens without admission. No flag sets it.
	overcommit bool
	// hookStep is a test's: called at each decode step of a /generate
	// request that got a place, and with stepEnded when it has ended or
	// was refused admission.
	hookStep func(ctx context.Context, step int)
}

// Defaults of the request parameters that a request leaves out.
const (
	defaultPrompt = 64
	defaultTokens = 16
	defaultBatch  = 1
)

// defaultConfig is the configuration without flags.
func defaultConfig() config {
	return config{
		addr:     "localhost:8080",
		capacity: 256 << 20,
		budget:   64 << 20,
		cache:    8 << 20,
		drain:    15 * time.Second,
		// The largest request (512+512 tokens, batch 8) holds about 2.6 MiB:
		// 16 of them at once fit the budget less the prompt-mask cache.
		maxPrompt: 512,
		maxTokens: 512,
		maxBatch:  8,

		debugAddr:   "127.0.0.1:6060",
		maxInFlight: 16,
		sized:       true,
	}
}

// parseFlags reads the command line into a validated config. Usage and
// flag errors go to out.
func parseFlags(args []string, out io.Writer) (config, error) {
	c := defaultConfig()
	fs := flag.NewFlagSet("inferenceserver", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(out, "usage: inferenceserver [flags]\n\n"+
			"Serves a toy decode loop on pooled tensors over HTTP (POST /generate), with the\n"+
			"tensor profile at /debug/pprof/tensors, net/http/pprof and OpenTelemetry metrics at\n"+
			"/metrics on a separate debug listener (-debug-addr).\n\nflags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&c.addr, "addr", c.addr, "public listen address: POST /generate and GET /healthz only")
	fs.BoolVar(&c.leak, "leak", c.leak, "inject the leak: a new mask every decode step, kept in an unbounded map")
	devflag.Var(fs, &c.device)
	fs.Int64Var(&c.capacity, "capacity", c.capacity, "device capacity in bytes: the GPU the host device stands for, or on cuda:N the most memory taken from the GPU")
	fs.Int64Var(&c.budget, "budget", c.budget, "pool memory budget in bytes")
	fs.Int64Var(&c.cache, "cache", c.cache, "prompt-mask cache budget in bytes")
	fs.DurationVar(&c.drain, "drain", c.drain, "how long shutdown waits for requests in flight")
	fs.IntVar(&c.watchAfter, "watch-after", c.watchAfter, "requests the growth watcher only takes as its baseline (watch.WarmUp): what a starting service keeps on purpose")
	fs.IntVar(&c.maxPrompt, "max-prompt", c.maxPrompt, "longest prompt a request may send, in tokens")
	fs.IntVar(&c.maxTokens, "max-tokens", c.maxTokens, "most tokens a request may generate")
	fs.IntVar(&c.maxBatch, "max-batch", c.maxBatch, "most sequences a request may decode together")

	// Listeners and admission.
	fs.StringVar(&c.debugAddr, "debug-addr", c.debugAddr,
		"debug listen address: profiles, net/http/pprof, summary, metrics; keep it private (empty: none)")
	fs.IntVar(&c.maxInFlight, "max-inflight", c.maxInFlight,
		"most /generate requests running at once; more get 503 (without -admission the budget must hold this many of the largest)")
	fs.BoolVar(&c.admission, "admission", c.admission,
		"admit each /generate request with a reservation sized for it (see -sized); one the budget cannot hold gets 503 at once")
	fs.BoolVar(&c.sized, "sized", c.sized,
		"with -admission, reserve for each request's size (its tokens times its batch) what its kind's requests of that size held, or the worst case of that size without that history; false: its kind's p99 peak (the largest request until 20 have ended)")

	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("%w: unexpected arguments %q", errBadConfig, fs.Args())
	}
	return c, c.validate()
}

// validate checks the config as a whole.
func (c config) validate() error {
	switch {
	case c.addr == "":
		return fmt.Errorf("%w: empty -addr", errBadConfig)
	case c.capacity <= 0 || c.budget <= 0 || c.cache < 0:
		return fmt.Errorf("%w: -capacity and -budget must be positive, -cache at least 0", errBadConfig)
	case c.budget > c.capacity:
		return fmt.Errorf("%w: -budget %d exceeds the device -capacity %d", errBadConfig, c.budget, c.capacity)
	case c.drain <= 0:
		return fmt.Errorf("%w: -drain must be positive", errBadConfig)
	case c.watchAfter < 0:
		return fmt.Errorf("%w: -watch-after must be at least 0", errBadConfig)
	case c.maxPrompt < 1 || c.maxTokens < 1 || c.maxBatch < 1:
		return fmt.Errorf("%w: -max-prompt, -max-tokens and -max-batch must be at least 1", errBadConfig)
	case c.maxPrompt+c.maxTokens > 1<<20:
		return fmt.Errorf("%w: -max-prompt plus -max-tokens exceeds %d tokens", errBadConfig, 1<<20)
	}
	return c.validateAdmission()
}

// validateAdmission checks the listeners and that the budget holds
// maxInFlight of the largest request the bounds allow, next to a full
// prompt-mask cache: then no request, nor a burst of them, can take the
// memory the others need. With -admission it counts reservations instead
// of worst cases: each request is admitted only if its reservation fits,
// so the budget must hold one largest request (the reservation of a kind
// without history) next to the cache, and maxInFlight bounds only how many
// run at once.
func (c config) validateAdmission() error {
	switch {
	case c.debugAddr != "" && c.debugAddr == c.addr && !strings.HasSuffix(c.addr, ":0"):
		return fmt.Errorf("%w: -debug-addr must differ from -addr: the debug endpoints stay off the public listener", errBadConfig)
	case c.maxInFlight < 1 || c.maxInFlight > 1024:
		return fmt.Errorf("%w: -max-inflight %d, want 1..1024", errBadConfig, c.maxInFlight)
	case c.cache >= c.budget:
		return fmt.Errorf("%w: -cache %d leaves nothing of -budget %d for requests", errBadConfig, c.cache, c.budget)
	}
	need := requestBytes(c.maxPrompt, c.maxTokens, c.maxBatch)
	if c.admission {
		if need > c.budget-c.cache {
			return fmt.Errorf("%w: the largest request (-max-prompt %d, -max-tokens %d, -max-batch %d) holds up to %d bytes, "+
				"more than -budget less -cache leaves (%d): with -admission no such request could ever be admitted",
				errBadConfig, c.maxPrompt, c.maxTokens, c.maxBatch, need, c.budget-c.cache)
		}
		return nil
	}
	share := (c.budget - c.cache) / int64(c.maxInFlight)
	if need > share && !c.overcommit {
		return fmt.Errorf("%w: the largest request (-max-prompt %d, -max-tokens %d, -max-batch %d) holds up to %d bytes, "+
			"but -budget less -cache over -max-inflight %d leaves %d per request: lower the bounds or -max-inflight, or raise -budget",
			errBadConfig, c.maxPrompt, c.maxTokens, c.maxBatch, need, c.maxInFlight, share)
	}
	return nil
}
