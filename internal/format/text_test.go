package format

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestText(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want string
		cut  bool
	}{
		{"plain", 16, "plain", false},
		{"a\xffb", 16, "a\uFFFDb", true},
		{strings.Repeat("x", 20), 10, strings.Repeat("x", 7) + Cut, true},
		{strings.Repeat("é", 10), 9, "ééé" + Cut, true},
		{strings.Repeat("\xff", 1<<20), 16, "\uFFFD", true}, // a run of invalid bytes is one U+FFFD
		{strings.Repeat("a\xff", 1<<20), 16, strings.Repeat("a\uFFFD", 3) + "a" + Cut, true},
		{"", 4, "", false},
	} {
		got, cut := Text(tc.in, tc.max)
		assert.Equal(t, tc.want, got, "%q", tc.in[:min(len(tc.in), 20)])
		assert.Equal(t, tc.cut, cut)
		assert.True(t, utf8.ValidString(got))
		assert.LessOrEqual(t, len(got), tc.max)
	}
}

func FuzzText(f *testing.F) {
	f.Add("a\xffb", 8)
	f.Add(strings.Repeat("é", 40), 7)
	f.Fuzz(func(t *testing.T, s string, max int) {
		max = len(Cut) + abs(max)%300
		got, cut := Text(s, max)
		if !utf8.ValidString(got) || len(got) > max {
			t.Fatalf("Text(%q, %d) = %q", s, max, got)
		}
		if !cut && got != s {
			t.Fatalf("uncut text changed")
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -(n + 1)
	}
	return n
}
