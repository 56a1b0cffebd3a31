// Package format renders the figures every tensorlife report shows, so that
// an out-of-memory error, a memory summary, a leak report, a profile's text
// form and a timeline print the same number the same way: bytes in binary
// units, ages rounded to what a reader compares, shapes, and lists of call
// sites with the memory they hold.
package format

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

var byteUnits = [...]string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}

// Names of the frames reports show for stacks they cannot name.
const (
	// OverflowFunction stands for every allocation whose stack was not kept
	// because a tracker's stack table was full (track.MaxSites).
	OverflowFunction = "tensorlife.StackTableOverflow"
	// UnknownFunction names frames that could not be symbolized.
	UnknownFunction = "tensorlife.UnknownFunction"
)

// ByteUnit returns the binary unit that Bytes renders a magnitude of v
// bytes in (v >= 0): its size in bytes and its name, "B" below 1 KiB. A
// chart scales its axis by it, so that its ticks read as the figures of
// every report do.
func ByteUnit(v float64) (size float64, name string) {
	size = 1
	i := 0
	for v >= 1024*size && i < len(byteUnits)-1 {
		size *= 1024
		i++
	}
	return size, byteUnits[i]
}

// Bytes renders a byte count in binary units with up to one decimal:
// "512 B", "4 KiB", "1.5 MiB", "-2 GiB". Every int64 is accepted, math.MinInt64
// included.
func Bytes(n int64) string {
	if n < 1024 && n > -1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	sign := ""
	f := float64(n) // exact enough at any magnitude; no negation overflows
	if f < 0 {
		sign, f = "-", -f
	}
	size, unit := ByteUnit(f)
	s := strconv.FormatFloat(f/size, 'f', 1, 64) // size is a power of two: the division is exact
	s = strings.TrimSuffix(s, ".0")
	return sign + s + " " + unit
}

// BytesOf renders part of whole, as Bytes does, except that a part
// below the whole never reads as much as it: 27.5 KiB in use of 256 MiB
// leaves "255.9 MiB" free, not "256 MiB". Rounding down keeps the two
// figures in the order they are in.
func BytesOf(part, whole int64) string {
	s := Bytes(part)
	if part >= whole || part < 1024 || s != Bytes(whole) {
		return s
	}
	size, unit := ByteUnit(float64(part))
	f := math.Floor(float64(part)/size*10) / 10
	return strings.TrimSuffix(strconv.FormatFloat(f, 'f', 1, 64), ".0") + " " + unit
}

// Age renders a duration coarsely enough to read at a glance and to stay put
// between two reports taken moments apart: "<1ms" under a millisecond,
// milliseconds under a second, tenths of a second under a minute, whole
// seconds past that. Negative ages (clock steps) render as "<1ms".
func Age(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return "<1ms"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}

// Shape renders dims as "[2 3 4]"; no dimensions render as "[]".
func Shape(dims []int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range dims {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.Itoa(d))
	}
	b.WriteByte(']')
	return b.String()
}

// SiteLine is one entry of a site list: a call site and the live memory it
// holds.
type SiteLine struct {
	Function string
	File     string
	Line     int
	Count    int64
	Bytes    int64
	// Outlived is how many of Bytes outlived the request that made them
	// (track.WithRequest): what a growth watcher judges.
	Outlived int64
	// Via, when not empty, is the frame that tells this site apart from
	// another listed with the same line (Via renders it).
	Via string
	// Held names the owners still holding the memory after the tensors'
	// own handles were freed, each as HeldBy renders it.
	Held []string
}

// HeldBy renders who holds memory, as every report prints it: "held by a
// View made at decode.go:88 (pkg.decode)", with ", 3 handles" for more
// than one. holder is track.Holder's String.
func HeldBy(holder string, handles int) string {
	if handles > 1 {
		return fmt.Sprintf("held by %s, %d handles", holder, handles)
	}
	return "held by " + holder
}

// Via renders the frame that tells two stacks with one headline apart, as
// every report prints it: "via pkg.prefill (prefill.go:12)", the function
// shortened (Function) as in an owner's description.
func Via(function, file string, line int) string {
	return fmt.Sprintf("via %s (%s:%d)", Function(function), File(file), line)
}

// WriteSites writes a numbered list of sites under a title, each as
//
//  1. 13.2 MiB in 10073 tensors: main.(*agent).decode
//     /src/agent.go:72
//     via main.(*agent).step (agent.go:40)
//     held by a View made at agent.go:75 (main.(*agent).decode)
//
// indented by two spaces, each entry starting on a new line. An out-of-memory
// error and a pool closed with live blocks print their sites this way.
func WriteSites(b *strings.Builder, title string, sites []SiteLine) {
	if len(sites) == 0 {
		return
	}
	b.WriteString("\n  ")
	b.WriteString(title)
	b.WriteByte(':')
	for i, s := range sites {
		fmt.Fprintf(b, "\n  %d. %s in %d %s: %s\n       %s:%d", i+1, Bytes(s.Bytes), s.Count,
			plural(s.Count, "tensor"), s.Function, s.File, s.Line)
		if s.Via != "" {
			fmt.Fprintf(b, "\n       %s", s.Via)
		}
		if s.Outlived > 0 {
			fmt.Fprintf(b, "\n       %s of it outlived the request that made it", Bytes(s.Outlived))
		}
		for _, h := range s.Held {
			fmt.Fprintf(b, "\n       %s", h)
		}
	}
}

func plural(n int64, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}

// Function shortens a function name as reports print it, dropping the
// import path: "github.com/a/b/pkg.(*T).f" is "pkg.(*T).f". Slashes inside
// type arguments are kept.
func Function(fn string) string {
	head := fn
	if i := strings.IndexByte(fn, '['); i >= 0 {
		head = fn[:i]
	}
	if i := strings.LastIndexByte(head, '/'); i >= 0 {
		return fn[i+1:]
	}
	return fn
}

// File shortens a source path as reports print it, to its file name:
// "/src/x/a.go" is "a.go". The runtime writes paths with forward slashes on
// every system. An unknown file, "", stays "".
func File(file string) string {
	if i := strings.LastIndexByte(file, '/'); i >= 0 {
		return file[i+1:]
	}
	return file
}

// Forecast renders a leak's forecast as every report says it: "runs out in
// ~2h10m at 12 KiB/s". The time is rounded to what a forecast can claim:
// minutes past an hour, seconds past a minute.
func Forecast(runsOutIn time.Duration, bytesPerSecond float64) string {
	var in string
	switch d := runsOutIn; {
	case d >= time.Hour:
		in = strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
	case d >= time.Minute:
		in = d.Round(time.Second).String()
	default:
		in = Age(d)
	}
	return "runs out in ~" + in + " at " + Bytes(int64(bytesPerSecond)) + "/s"
}

// Wrap writes text after prefix in lines of at most width bytes, the
// following lines indented as far as the prefix.
func Wrap(b *strings.Builder, prefix, text string, width int) {
	indent := strings.Repeat(" ", len(prefix))
	line, words := prefix, 0
	for _, word := range strings.Fields(text) {
		if words > 0 && len(line)+1+len(word) > width {
			b.WriteString(line + "\n")
			line, words = indent, 0
		}
		if words > 0 {
			line += " "
		}
		line += word
		words++
	}
	b.WriteString(line + "\n")
}
