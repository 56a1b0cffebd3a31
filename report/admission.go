package report

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/tensorlife/tensorlife/internal/format"
	"github.com/tensorlife/tensorlife/pool"
)

// writeAdmission writes what the pools' admission answered and learned,
// by pool and kind: the requests admitted and refused, those that ran out
// of memory inside their admission or went past their reservation, the
// open admissions' bytes, and what each kind reserves. A reading with no
// admitted or refused request has no such section.
func writeAdmission(b *strings.Builder, pools []pool.Stats) {
	any := false
	for _, s := range pools {
		any = any || len(s.AdmissionKinds) > 0
	}
	if !any {
		return
	}
	b.WriteString("\nAdmission (requests admitted against the budget, by kind; ran out: inside their admission)\n")
	for _, s := range pools {
		if len(s.AdmissionKinds) == 0 {
			continue
		}
		var admitted, refused int64
		for _, k := range s.AdmissionKinds {
			admitted += max(k.Admitted, 0)
			refused += max(k.Refused, 0)
		}
		fmt.Fprintf(b, "  %s: %d admitted, %d refused (%s); %d open, reserving %s, %s of it not drawn\n",
			clipKind(s.Device, 12), admitted, refused, refusedShare(admitted, refused),
			max(s.Admissions, 0), bytesOf(s.Reservations), bytesOf(s.Promised))
		fmt.Fprintf(b, "  %-28s%10s%9s%9s%7s  %s\n", "kind", "admitted", "refused", "ran out", "past", "reserves")
		for _, k := range s.AdmissionKinds {
			fmt.Fprintf(b, "  %-28s%10d%9d%9d%7d  %s\n", clipKind(k.Kind, 28),
				max(k.Admitted, 0), max(k.Refused, 0), max(k.RanOut, 0), max(k.PastReservation, 0), reserves(k))
		}
	}
}

// refusedShare says what part of the requests were refused.
func refusedShare(admitted, refused int64) string {
	if admitted+refused == 0 {
		return "none asked"
	}
	return fmt.Sprintf("%d%% refused", refused*100/(admitted+refused))
}

// reserves says what a kind reserves for its next request: the line its
// requests with a size learned, their p99 without one, or the fallback
// while it has too little history.
func reserves(k pool.AdmissionKind) string {
	var parts []string
	if k.Sized >= pool.AdmitHistory {
		parts = append(parts, fmt.Sprintf("%s + %s a unit up to %d units", format.Bytes(int64(k.Base)), perUnit(k.PerUnit), k.MaxUnits))
	}
	if k.Requests >= pool.AdmitHistory && k.Requests > k.Sized {
		parts = append(parts, "p99 "+format.Bytes(k.P99))
	}
	if len(parts) == 0 {
		parts = append(parts, fmt.Sprintf("the fallback (%d ended)", max(k.Requests, 0)))
	}
	out := strings.Join(parts, "; ")
	if k.Boost > 1.01 {
		out += fmt.Sprintf(", raised ×%.2f", k.Boost)
	}
	return out
}

// perUnit writes a per-unit figure, which is often a fraction of a KiB.
func perUnit(b float64) string {
	if b < 1024 {
		return fmt.Sprintf("%.0f B", b)
	}
	return format.Bytes(int64(b))
}

// clipKind cuts s to at most n bytes at a rune boundary, marking the cut.
func clipKind(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const marker = "…"
	end := n - len(marker)
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + marker
}
