package format

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Every text tensorlife writes (an error, a log line, a metric attribute,
// a profile's label) is valid UTF-8 and bounded, whatever a caller or a
// part put in it: a label, a kind, a panic's value. Text is the one cut.

// Cut is the marker Text ends a cut text with.
const Cut = "…"

// Text returns s as valid UTF-8 of at most max bytes (max >= len(Cut)):
// each invalid byte becomes U+FFFD, and a text longer than max is cut at a
// character boundary and ends with Cut. cut reports whether s changed.
// A valid s within max is returned as is, without allocating.
func Text(s string, max int) (out string, cut bool) {
	if len(s) <= max && utf8.ValidString(s) {
		return s, false
	}
	if !utf8.ValidString(s) {
		if len(s) > 4*max+4 {
			s = s[:4*max+4] // what the cut below keeps, and a character's bytes to spare
		}
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if len(s) <= max {
		return s, true
	}
	n := max - len(Cut)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + Cut, true
}

// Value renders v (a panic's value, mostly) as Text of at most max bytes.
// A value whose own Error or String method panics is named as such
// rather than let the panic through: what renders a recovered panic must
// not panic in turn.
func Value(v any, max int) (s string) {
	defer func() {
		if recover() != nil {
			s = "(a value whose text panicked)"
		}
	}()
	switch v := v.(type) {
	case string:
		s = v
	case error:
		s = v.Error()
	case interface{ String() string }:
		s = v.String()
	default:
		s = fmt.Sprint(v)
	}
	s, _ = Text(s, max)
	return s
}
