package timeline

import (
	"math"
	"strconv"
	"strings"

	"github.com/tensorlife/tensorlife/internal/format"
)

// Human units for the picture's axes and labels: bytes in binary units
// (KiB, MiB, GiB), as device memory is sized and every report prints them
// (internal/format), and durations in the largest unit that keeps the axis
// short.

// timeUnit returns the unit for durations up to span nanoseconds.
func timeUnit(span float64) (float64, string) {
	switch {
	case span < 1e3:
		return 1, "ns"
	case span < 1e6:
		return 1e3, "µs"
	case span < 1e9:
		return 1e6, "ms"
	case span < 120e9:
		return 1e9, "s"
	default:
		return 60e9, "min"
	}
}

// formatDuration renders ns nanoseconds as "850 µs", "1.25 s", "12 min".
func formatDuration(ns int64) string {
	if ns == 0 {
		return "0 s"
	}
	size, unit := timeUnit(math.Abs(float64(ns)))
	return formatNumber(float64(ns)/size, 2) + " " + unit
}

// formatNumber renders v with up to prec decimals, trailing zeros dropped.
func formatNumber(v float64, prec int) string {
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if strings.IndexByte(s, '.') >= 0 {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		return "0"
	}
	return s
}

// formatCount renders n with thousands separators: 1,000,000.
func formatCount(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// niceStep returns a step of 1, 2 or 5 times a power of ten that cuts span
// into about target intervals.
func niceStep(span float64, target int) float64 {
	if span <= 0 || math.IsInf(span, 0) || math.IsNaN(span) {
		return 1
	}
	raw := span / float64(target)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	switch norm := raw / mag; {
	case norm <= 1:
		return mag
	case norm <= 2:
		return 2 * mag
	case norm <= 5:
		return 5 * mag
	default:
		return 10 * mag
	}
}

// axis is a labelled scale from lo to lo+top (base units: bytes or
// nanoseconds), with ticks at the multiples of step (in unit) inside it.
type axis struct {
	unitSize float64 // bytes or nanoseconds per unit
	unit     string
	step     float64 // in units
	lo, top  float64 // in base units: where the axis starts, and its length
}

// bytesAxis scales 0..maxBytes, rounding the top up to a whole tick.
func bytesAxis(maxBytes int64) axis {
	m := math.Max(float64(maxBytes), 1)
	size, unit := format.ByteUnit(m)
	step := niceStep(m/size, 5)
	if unit == "B" {
		step = math.Max(step, 1) // no fractions of a byte
	}
	top := math.Ceil(m/size/step) * step * size
	return axis{unitSize: size, unit: unit, step: step, top: top}
}

// timeAxis scales from..to, in nanoseconds.
func timeAxis(from, to int64) axis {
	s := math.Max(float64(to-from), 1)
	size, unit := timeUnit(s)
	return axis{unitSize: size, unit: unit, step: niceStep(s/size, 8), lo: float64(from), top: s}
}

// ticks returns the tick values in base units, lowest first.
func (a axis) ticks() []float64 {
	var out []float64
	stepBase := a.step * a.unitSize
	first := math.Ceil(a.lo/stepBase - 1e-9)
	end := (a.lo + a.top) * (1 + 1e-9)
	for i := 0; i <= 100; i++ {
		v := (first + float64(i)) * stepBase
		if v > end {
			break
		}
		out = append(out, v)
	}
	return out
}

// label renders a tick value in the axis unit.
func (a axis) label(v float64) string {
	if v == 0 {
		return "0"
	}
	return formatNumber(v/a.unitSize, 3) + " " + a.unit
}
