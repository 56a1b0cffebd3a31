package format

import (
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
