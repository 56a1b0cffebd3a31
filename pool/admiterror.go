package pool

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/tensorlife/tensorlife/internal/format"
)

// ErrAdmissionRefused means Admit found too little of the budget left for
// the request's reservation: the *AdmissionError that matches it names the
// kind, the reservation and the headroom. Nothing was allocated; a server
// answers at once (503 with Retry-After) instead of running out of memory
// midway.
var ErrAdmissionRefused = errors.New("pool: admission refused")

// ErrNoBudget means Admit was called on a pool without a budget: there is
// nothing to reserve against.
var ErrNoBudget = errors.New("pool: admission needs a budget")

// MaxKindBytes bounds a request kind as admission keeps and writes it (in
// Admission.Kind, AdmissionError and its text, Stats.AdmissionKinds and
// the metrics read from them): a longer kind is cut at a rune boundary to
// at most this many bytes, ending with "…", and invalid UTF-8 in it is
// replaced by U+FFFD. Two kinds that differ only past the cut are one kind.
const MaxKindBytes = 128

// cutMarker ends a kind that was cut.
const cutMarker = "…"

// cutKind returns kind as admission keeps it: valid UTF-8, at most
// MaxKindBytes bytes. A kind that is both is returned as it is, without
// allocating.
func cutKind(kind string) string {
	if len(kind) <= MaxKindBytes && utf8.ValidString(kind) {
		return kind
	}
	kind = strings.ToValidUTF8(kind, "\uFFFD")
	if len(kind) <= MaxKindBytes {
		return kind
	}
	n := MaxKindBytes - len(cutMarker)
	for n > 0 && !utf8.RuneStart(kind[n]) {
		n--
	}
	return kind[:n] + cutMarker
}

// AdmissionError is a refused admission: the request's kind and stated
// size, the bytes its reservation needed, and what the budget had left for
// it. It matches ErrAdmissionRefused.
type AdmissionError struct {
	// Kind is the request kind asked for, cut to MaxKindBytes.
	Kind string
	// Device is the pool's device.
	Device string
	// Units is the request's size as AdmitSized stated it; 0 from Admit.
	Units int64
	// Peak is the reservation the request needed: what its kind's history
	// says a request of its size holds at its peak, in the pool's rounded
	// bytes, or without that history the fallback.
	Peak int64
	// Fallback says Peak is the caller's fallback: the kind has too little
	// history (see Admission.Fallback).
	Fallback bool
	// Headroom is what the budget had left for a reservation: the budget
	// less active bytes and the reservations of open admissions.
	Headroom int64
	// Budget is the pool's budget.
	Budget int64
	// Open counts the admissions open when it was refused.
	Open int64
}

func (e *AdmissionError) Error() string {
	what := "learned peak"
	if e.Fallback {
		what = "fallback reservation (too little history)"
	}
	size := ""
	if e.Units > 0 {
		size = fmt.Sprintf(" of %d units", e.Units)
	}
	return fmt.Sprintf("pool: admission refused on %s: kind %q%s needs its %s of %s, headroom %s of budget %s (%d admitted requests open)",
		e.Device, e.Kind, size, what, format.Bytes(e.Peak), format.Bytes(e.Headroom), format.Bytes(e.Budget), e.Open)
}

// Unwrap makes the error match ErrAdmissionRefused.
func (e *AdmissionError) Unwrap() error { return ErrAdmissionRefused }
