package report_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/report"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// The summary says what admission answered, by pool and kind, and what
// each kind reserves: a service that refuses most of its requests reads
// so, and which kind it refuses.
func TestSummaryAdmission(t *testing.T) {
	tr, err := track.New(track.Name(t.Name()))
	require.NoError(t, err)
	host, err := tensor.NewHostDevice(64 << 20)
	require.NoError(t, err)
	p, err := pool.New(host, pool.Tracker(tr), pool.Budget(8<<20))
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()

	// 20 sized requests of /gen, 4 KiB a unit, teach it a line.
	for i := range pool.AdmitHistory {
		units := int64(4 + i%4)
		ctx, a, err := p.AdmitSized(context.Background(), "route=/gen", units, 1<<20)
		require.NoError(t, err)
		x, err := tensor.New(ctx, p, tensor.Uint8, int(units)*4096)
		require.NoError(t, err)
		require.NoError(t, x.Free())
		a.End()
	}
	// /embed holds 6 MiB open; the next three of it are refused.
	_, open, err := p.Admit(context.Background(), "route=/embed", 6<<20)
	require.NoError(t, err)
	defer open.End()
	for range 3 {
		_, _, err := p.Admit(context.Background(), "route=/embed", 6<<20)
		require.ErrorIs(t, err, pool.ErrAdmissionRefused)
	}

	var b strings.Builder
	require.NoError(t, report.WriteSummary(&b, tr))
	out := b.String()
	section := out[strings.Index(out, "\nAdmission"):]
	section = section[:strings.Index(section[1:], "\n\n")+1]
	assert.Equal(t, `
Admission (requests admitted against the budget, by kind; ran out: inside their admission)
  host: 21 admitted, 3 refused (12% refused); 1 open, reserving 6 MiB, 6 MiB of it not drawn
  kind                          admitted  refused  ran out   past  reserves
  route=/embed                         1        3        0      0  the fallback (0 ended)
  route=/gen                          20        0        0      0  0 B + 4 KiB a unit up to 7 units`, section)
	for _, line := range strings.Split(section, "\n") {
		assert.LessOrEqual(t, len([]rune(line)), 100, line)
	}
}
