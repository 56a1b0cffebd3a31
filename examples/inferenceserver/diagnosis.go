package main

import (
	"fmt"
	"log/slog"
	"strings"
)

// requestKey is the label that carries a request's id: the profiles and
// the error texts show it.
const requestKey = "request"

// diagnosis is an error whose text spans lines, such as the diagnosis of
// an out-of-memory error, logged as one record with a field per line: its
// first line as err.error, then err.line01, err.line02, ... A text log
// then reads line by line instead of one line of \n escapes, and a JSON
// log holds the lines as an object. It is the error itself to errors.Is
// and errors.As.
type diagnosis struct{ error }

// LogValue returns the error's lines as a group.
func (d diagnosis) LogValue() slog.Value {
	lines := strings.Split(strings.TrimRight(d.Error(), "\n"), "\n")
	attrs := make([]slog.Attr, 0, len(lines))
	attrs = append(attrs, slog.String("error", lines[0]))
	for i, l := range lines[1:] {
		attrs = append(attrs, slog.String(fmt.Sprintf("line%02d", i+1), strings.TrimRight(l, " ")))
	}
	return slog.GroupValue(attrs...)
}

// Unwrap returns the error logged.
func (d diagnosis) Unwrap() error { return d.error }
