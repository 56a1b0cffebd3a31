package track

import (
	"strconv"
	"strings"
)

// FormatBytes renders a byte count in binary units with up to one decimal:
// 512 B, 4 KiB, 1.5 MiB. Reports across tensorlife use it.
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	sign := ""
	f := float64(n)
	if n < 0 {
		sign, f = "-", -f
	}
	suffixes := [...]string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := -1
	for f >= unit && i < len(suffixes)-1 {
		f /= unit
		i++
	}
	s := strconv.FormatFloat(f, 'f', 1, 64)
	s = strings.TrimSuffix(s, ".0")
	return sign + s + " " + suffixes[i]
}
