package timeline

import (
	"fmt"
	"math"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lab converts a colour #rrggbb to CIELAB (D65), to measure how far apart
// two colours look.
func lab(t *testing.T, hex string) [3]float64 {
	t.Helper()
	require.Len(t, hex, 7)
	var rgb [3]float64
	for i := range rgb {
		v, err := strconv.ParseUint(hex[1+2*i:3+2*i], 16, 8)
		require.NoError(t, err)
		c := float64(v) / 255
		if c <= 0.04045 {
			rgb[i] = c / 12.92
		} else {
			rgb[i] = math.Pow((c+0.055)/1.055, 2.4)
		}
	}
	r, g, b := rgb[0], rgb[1], rgb[2]
	x := (0.4124*r + 0.3576*g + 0.1805*b) / 0.95047
	y := 0.2126*r + 0.7152*g + 0.0722*b
	z := (0.0193*r + 0.1192*g + 0.9505*b) / 1.08883
	f := func(v float64) float64 {
		if v > 0.008856 {
			return math.Cbrt(v)
		}
		return 7.787*v + 16.0/116
	}
	return [3]float64{116*f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))}
}

func deltaE(t *testing.T, a, b string) float64 {
	la, lb := lab(t, a), lab(t, b)
	return math.Sqrt((la[0]-lb[0])*(la[0]-lb[0]) + (la[1]-lb[1])*(la[1]-lb[1]) + (la[2]-lb[2])*(la[2]-lb[2]))
}

// Any two series colours, and each against the markers' and the "other"
// band's, are far enough apart to tell at a glance (ΔE*ab of 25 or more;
// the replaced palette had two teals 4 apart).
func TestPaletteColoursAreEasyToTellApart(t *testing.T) {
	const minDeltaE = 25
	for i, a := range palette {
		for _, b := range palette[i+1:] {
			assert.GreaterOrEqual(t, deltaE(t, a, b), float64(minDeltaE), "%s and %s", a, b)
		}
		others := []string{otherColor}
		for _, st := range markStyle {
			others = append(others, st.color)
		}
		for _, b := range others {
			assert.GreaterOrEqual(t, deltaE(t, a, b), float64(minDeltaE), "series %s and %s", a, b)
		}
	}
}

// Adjacent bands never share a colour, also when there are more bands than
// colours.
func TestAdjacentBandsDiffer(t *testing.T) {
	for n := 1; n <= MaxBands+1; n++ {
		series := make([]Series, n)
		for i := range series {
			series[i] = Series{Function: fmt.Sprintf("main.f%d", i%3), File: "/src/main.go", Line: 10 + i}
		}
		series[n-1] = Series{Name: OtherName} // "other" on top
		colors := seriesColors(series)
		for i := 1; i < n; i++ {
			assert.NotEqual(t, colors[i-1], colors[i], "bands %d and %d of %d", i-1, i, n)
		}
		if n <= 3*len(shadeMix)+1 { // three functions, a shade for each of their lines
			seen := map[string]bool{}
			for _, c := range colors {
				assert.False(t, seen[c], "colour %s used twice among %d series", c, n)
				seen[c] = true
			}
		}
	}
}

// A line keeps its colour across checkouts: the directory of the source
// file takes no part in it.
func TestColoursStableAcrossCheckouts(t *testing.T) {
	at := func(dir string) []Series {
		var out []Series
		for i, fn := range []string{"main.(*agent).decodeLeaky", "main.(*agent).logits", "main.(*agent).prefill", "main.newKV"} {
			out = append(out, Series{Function: fn, File: dir + "/examples/agentleak/agent.go", Line: 40 + i})
		}
		return out
	}
	home := seriesColors(at("/home/ana/src/tensorlife"))
	ci := seriesColors(at("/builds/tensorlife/tensorlife"))
	assert.Equal(t, home, ci)
	assert.Equal(t, colorIndex(&Series{Function: "main.f", File: "/x/main.go", Line: 1}),
		colorIndex(&Series{Function: "main.f", File: "C:/Users/bo/y/main.go", Line: 1}))
}

// A site keeps its colour whatever else a picture shows and however the
// bands stack: the README's leaky and fixed pictures share two sites.
func TestSiteKeepsItsColourAcrossPictures(t *testing.T) {
	site := func(fn string, line int, device string) Series {
		return Series{Function: fn, File: "/src/examples/agentleak/agent.go", Line: line, Device: device}
	}
	serve, logits := site("main.(*agent).serve", 55, ""), site("main.(*agent).logits", 124, "")
	leaky := []Series{site("main.(*agent).decodeLeaky", 76, ""), serve, logits}
	fixed := []Series{site("main.(*agent).decodeFixed.func1", 93, ""), serve, logits, site("main.(*agent).decodeFixed", 103, ""), {Name: OtherName}}
	lc, fc := seriesColors(leaky), seriesColors(fixed)
	assert.Equal(t, lc[1], fc[1], "serve")
	assert.Equal(t, lc[2], fc[2], "logits")
	seen := map[string]bool{}
	for _, c := range fc {
		assert.False(t, seen[c], "colour %s twice in %v", c, fc)
		seen[c] = true
	}
	// On two devices a line keeps its hue: one device has it, the other
	// a shade of it, and the two differ.
	two := seriesColors([]Series{site("main.(*agent).serve", 55, "host:1"), site("main.(*agent).serve", 55, "host:0")})
	base := palette[colorIndex(&serve)]
	assert.Equal(t, base, two[1], "the first device has the hue itself")
	assert.Equal(t, shadeOf(base, 1), two[0])
	assert.NotEqual(t, two[0], two[1])
}
