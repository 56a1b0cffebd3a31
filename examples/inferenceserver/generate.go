package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"sync"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// The toy model's sizes: what one decode step allocates.
const (
	kvWidth   = 64  // KV-cache elements per token and sequence
	kvPage    = 64  // tokens per KV-cache page
	vocabSize = 512 // logits per sequence and step
)

// requestBytes bounds the device memory one request of these sizes holds
// at once, from the shapes generate makes: its KV cache (float16, in pages
// of kvPage tokens), its
// prompt's causal mask (float32; cached, or freed after the prefill when
// the cache cannot hold it), its growable mask (float32) and one step's
// logits (float32). Each is rounded up as the pool's size classes may round
// it: a quarter more, and up to 512 bytes for a small one.
func requestBytes(prompt, tokens, batch int) int64 {
	p, t, b := int64(prompt), int64(tokens), int64(batch)
	round := func(n int64) int64 { return n + n/4 + 512 }
	pages := (p + t + kvPage - 1) / kvPage
	return pages*round(b*kvPage*kvWidth*2) + round(p*p*4) + round((p+t)*b*4) + round(b*vocabSize*4)
}

// requestUnits is a request's size as admission is told it (-sized): the
// token positions its KV cache and masks hold at the end, prompt plus
// generated tokens, for each sequence of its batch.
func requestUnits(req generateRequest) int64 {
	return int64(req.Prompt+req.Tokens) * int64(req.Batch)
}

// errBadRequest means /generate parameters the server cannot serve.
var errBadRequest = errors.New("bad request")

// generateRequest is what a /generate request asks for. As JSON (a POST
// body) and as query parameters the names are the same.
type generateRequest struct {
	Prompt int `json:"prompt"` // prompt length in tokens
	Tokens int `json:"tokens"` // tokens to generate
	Batch  int `json:"batch"`  // sequences decoded together
}

// generateResponse is the answer of a served request: about the request
// alone. What the server holds (its live bytes, which grow under -leak) is
// for operators, on the debug listener's metrics and profiles.
type generateResponse struct {
	Request string `json:"request"`
	Mode    string `json:"mode"` // "fixed" or "leak"
	generateRequest
}

// newRequestID returns a random request id, "r" and 16 hex digits: a
// counter would tell every client how many requests the server has
// served.
func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "r" + hex.EncodeToString(b[:])
}

// maxBody bounds a /generate JSON body: three small numbers.
const maxBody = 4 << 10

// parseGenerate reads a request's parameters: query parameters prompt,
// tokens and batch, or a POST body {"prompt": 64, "tokens": 16, "batch": 1}
// with Content-Type application/json, whose fields take precedence. Each is
// optional (defaults: 64, 16, 1, lowered to the configured bounds) and
// must lie within those bounds. An unknown or repeated parameter, a
// malformed number or body, or a value out of bounds is an error matching
// errBadRequest.
func parseGenerate(r *http.Request, cfg config) (generateRequest, error) {
	req := generateRequest{
		Prompt: min(defaultPrompt, cfg.maxPrompt),
		Tokens: min(defaultTokens, cfg.maxTokens),
		Batch:  min(defaultBatch, cfg.maxBatch),
	}
	fields := map[string]*int{"prompt": &req.Prompt, "tokens": &req.Tokens, "batch": &req.Batch}
	for name, values := range r.URL.Query() {
		dst, ok := fields[name]
		switch {
		case !ok:
			return req, fmt.Errorf("%w: unknown parameter %q; want prompt, tokens, batch", errBadRequest, name)
		case len(values) != 1:
			return req, fmt.Errorf("%w: parameter %q given %d times", errBadRequest, name, len(values))
		}
		n, err := strconv.Atoi(values[0])
		if err != nil {
			return req, fmt.Errorf("%w: %s=%q is not an integer", errBadRequest, name, values[0])
		}
		*dst = n
	}
	if r.Method == http.MethodPost && r.ContentLength != 0 {
		if err := decodeBody(r, &req); err != nil {
			return req, err
		}
	}
	bounds := []struct {
		name string
		v    int
		max  int
	}{{"prompt", req.Prompt, cfg.maxPrompt}, {"tokens", req.Tokens, cfg.maxTokens}, {"batch", req.Batch, cfg.maxBatch}}
	for _, b := range bounds {
		if b.v < 1 || b.v > b.max {
			return req, fmt.Errorf("%w: %s=%d, want 1..%d", errBadRequest, b.name, b.v, b.max)
		}
	}
	return req, nil
}

// decodeBody reads a JSON body onto req: fields present replace req's.
func decodeBody(r *http.Request, req *generateRequest) error {
	ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || ct != "application/json" {
		return fmt.Errorf("%w: a POST body must be application/json", errBadRequest)
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody+1))
	dec.DisallowUnknownFields()
	if err := dec.Decode(req); err != nil {
		return fmt.Errorf("%w: body: %v", errBadRequest, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: body holds more than one JSON value", errBadRequest)
	}
	return nil
}

// serveGenerate answers POST /generate: 200 with a generateResponse, 400
// for bad parameters, 503 with Retry-After when cfg.maxInFlight requests are
// already running, when admission (-admission) refuses the request, when
// the pool is out of memory, or when the server is shutting down, 500
// otherwise. An error answer names the request's id and
// nothing of the server's insides: the out-of-memory report, with the call
// sites and source paths that hold the memory, goes to the log under that
// id.
func (s *server) serveGenerate(w http.ResponseWriter, r *http.Request) {
	if !s.inflight.enter() {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	defer s.inflight.leave()
	req, err := parseGenerate(r, s.cfg)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	id := newRequestID()
	w.Header().Set("X-Request-Id", id)
	select {
	case s.admit <- struct{}{}:
		s.admitted.Add(1)
	default:
		s.log.Debug("busy", slog.String("request", id), slog.Int("max_inflight", s.cfg.maxInFlight))
		w.Header().Set("Retry-After", "1")
		http.Error(w, fmt.Sprintf("busy: %d requests running, the most this server runs at once; retry later (request %s)",
			s.cfg.maxInFlight, id), http.StatusServiceUnavailable)
		return
	}
	// The route's wrapper (httptrack.Route, in Handler) began the request
	// and labelled its route; it ends it when this handler returns.
	ctx := track.WithLabels(r.Context(), requestKey, id)
	l := s.nextLane()
	var adm *pool.Admission
	if s.cfg.admission {
		kind := s.tr.KindOf(track.LabelsFrom(ctx))
		if s.cfg.sized {
			ctx, adm, err = l.pool.AdmitSized(ctx, kind, requestUnits(req), requestBytes(req.Prompt, req.Tokens, req.Batch))
		} else {
			ctx, adm, err = l.pool.Admit(ctx, kind, s.largest)
		}
		if err != nil {
			s.step(ctx, stepEnded)
			<-s.admit
			s.refuse(w, id, err)
			return
		}
	}
	err = s.generate(ctx, l, req, id)
	if adm != nil {
		// The reservation would go when the handler returns (its context
		// ends); it goes now, before the answer is written, as the place
		// below does.
		adm.End()
	}
	s.step(ctx, stepEnded)
	s.tick()
	// The place is given back before the answer is written, so a client
	// that sends its next request on reading this one finds it free.
	<-s.admit

	switch {
	case err == nil:
		resp := generateResponse{Request: id, Mode: s.mode(), generateRequest: req}
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(resp); err != nil {
			s.log.Debug("writing response", slog.String("request", id), slog.Any("err", err))
		}
	case errors.Is(err, tensor.ErrOutOfMemory):
		s.log.Warn("out of memory", slog.String("request", id), slog.Any("err", diagnosis{err}))
		w.Header().Set("Retry-After", "1")
		http.Error(w, "out of memory: the server is at its memory budget; retry later (request "+id+")",
			http.StatusServiceUnavailable)
	case r.Context().Err() != nil:
		// The client left or the drain ran out: nobody reads the answer.
		s.log.Debug("request canceled", slog.String("request", id), slog.Any("err", err))
		http.Error(w, "request canceled", http.StatusServiceUnavailable)
	default:
		s.log.Error("generate", slog.String("request", id), slog.Any("err", err))
		http.Error(w, "internal error (request "+id+")", http.StatusInternalServerError)
	}
}

// refuse answers a request that admission refused: 503 with Retry-After
// at once, before any memory was taken. The refusal (kind, its peak, the
// headroom) goes to the log under the request's id.
func (s *server) refuse(w http.ResponseWriter, id string, err error) {
	var ae *pool.AdmissionError
	if !errors.As(err, &ae) {
		s.log.Error("admit", slog.String("request", id), slog.Any("err", err))
		http.Error(w, "internal error (request "+id+")", http.StatusInternalServerError)
		return
	}
	s.refused.Add(1)
	s.log.Info("admission refused", slog.String("request", id), slog.Any("err", err))
	w.Header().Set("Retry-After", "1")
	http.Error(w, "busy: the memory budget holds no more requests like this one now; retry later (request "+id+")",
		http.StatusServiceUnavailable)
}

func (s *server) mode() string {
	if s.leaked != nil {
		return "leak"
	}
	return "fixed"
}

// generate runs one request: a KV cache that grows a page of kvPage
// tokens at a time, as paged attention allocates it, the prompt's causal
// mask from the shared cache, then one step per token. Every tensor it
// makes carries ctx's labels and is freed before it returns, except, with
// -leak, the step masks.
func (s *server) generate(ctx context.Context, l *lane, req generateRequest, id string) (err error) {
	kv := &kvCache{ctx: ctx, pool: l.pool, batch: req.Batch}
	defer func() { err = errors.Join(err, kv.free()) }()
	if err := kv.grow(req.Prompt); err != nil {
		return err
	}
	if err := s.prefill(ctx, l, req.Prompt); err != nil {
		return err
	}
	if s.leaked != nil {
		return s.decodeLeaky(ctx, l, kv, id, req)
	}
	return s.decodeFixed(ctx, l, kv, req)
}

// kvCache is one request's KV cache: pages of kvPage tokens, one more each
// time the tokens outgrow them.
type kvCache struct {
	ctx   context.Context
	pool  *pool.Pool
	batch int
	pages []*tensor.Tensor
}

// grow makes room for tokens tokens.
func (c *kvCache) grow(tokens int) error {
	for len(c.pages)*kvPage < tokens {
		page, err := tensor.Make(c.ctx, c.pool, tensor.Spec{DType: tensor.Float16,
			Shape: tensor.Shape{c.batch, kvPage, kvWidth}, Kind: "kv-cache"})
		if err != nil {
			return err
		}
		c.pages = append(c.pages, page)
	}
	return nil
}

func (c *kvCache) free() error {
	var errs []error
	for _, p := range c.pages {
		errs = append(errs, p.Free())
	}
	c.pages = nil
	return errors.Join(errs...)
}

// prefill takes the prompt's causal mask from the cache, building it on a
// miss: requests repeat prompt lengths, so the mask is worth sharing, and
// the cache's byte budget bounds what sharing costs.
func (s *server) prefill(ctx context.Context, l *lane, prompt int) error {
	m, err := l.prompts.GetOrBuild(ctx, "causal/"+strconv.Itoa(prompt), func(ctx context.Context) (*tensor.Tensor, error) {
		return s.buildPromptMask(ctx, l, prompt)
	})
	if err != nil {
		return err
	}
	// Attention over the prompt would read m here; the cache keeps its own
	// handle.
	return m.Free()
}

// buildPromptMask makes a prompt's causal mask; profiles show cached
// prompt masks under this name.
func (s *server) buildPromptMask(ctx context.Context, l *lane, prompt int) (*tensor.Tensor, error) {
	return l.masks.Causal(ctx, prompt)
}

// decodeFixed builds the request's mask once and grows it one token per
// step: a few bytes copied per step, nothing allocated, one mask freed at
// the end.
func (s *server) decodeFixed(ctx context.Context, l *lane, kv *kvCache, req generateRequest) (err error) {
	m, err := l.masks.NewGrowable(ctx, req.Batch, req.Prompt+req.Tokens)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, m.Free()) }()
	if err := m.Append(req.Prompt); err != nil {
		return err
	}
	for step := range req.Tokens {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.step(ctx, step)
		if err := kv.grow(req.Prompt + step + 1); err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
		if err := m.Append(1); err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
		view, err := m.View() // [tokens so far, batch], what the kernel reads
		if err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
		if err := errors.Join(s.forward(ctx, l, req.Batch), view.Free()); err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
	}
	return nil
}

// decodeLeaky is the seed's bug, served with -leak: the valid positions
// grow by one token per step, and every step turns them into a new mask
// tensor, kept forever in a map that nothing evicts.
func (s *server) decodeLeaky(ctx context.Context, l *lane, kv *kvCache, id string, req generateRequest) error {
	lengths := make([]int, req.Batch)
	for pos := req.Prompt; pos < req.Prompt+req.Tokens; pos++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := kv.grow(pos + 1); err != nil {
			return fmt.Errorf("step %d: %w", pos-req.Prompt, err)
		}
		for i := range lengths {
			lengths[i] = pos + 1
		}
		m, err := l.masks.Padding(ctx, lengths, pos+1) // the leak: a new mask every step
		if err != nil {
			return fmt.Errorf("step %d: %w", pos-req.Prompt, err)
		}
		s.leaked.put(id+"/"+strconv.Itoa(pos), m)
		if err := s.forward(ctx, l, req.Batch); err != nil {
			return fmt.Errorf("step %d: %w", pos-req.Prompt, err)
		}
	}
	return nil
}

// forward stands for one forward pass: its logits are made and freed.
func (s *server) forward(ctx context.Context, l *lane, batch int) error {
	logits, err := tensor.Make(ctx, l.pool, tensor.Spec{DType: tensor.Float32, Shape: tensor.Shape{batch, vocabSize}, Kind: "logits"})
	if err != nil {
		return err
	}
	return logits.Free()
}

// leakMap is the seed's global mask cache: keyed by request and step, so no
// entry is ever looked up again or removed. It is safe for concurrent use.
type leakMap struct {
	mu    sync.Mutex
	masks map[string]*tensor.Tensor
}

func (l *leakMap) put(key string, m *tensor.Tensor) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.masks[key] = m
}

// freeAll frees every mask, as a shutdown would; the map is empty after.
func (l *leakMap) freeAll() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	for k, m := range l.masks {
		errs = append(errs, m.Free())
		delete(l.masks, k)
	}
	return errors.Join(errs...)
}
