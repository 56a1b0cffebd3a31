package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLeakyRunNamesTheMaskLine(t *testing.T) {
	o, err := parseFlags([]string{"-requests", "8"}, &bytes.Buffer{})
	require.NoError(t, err)
	res, err := simulate(context.Background(), o)
	require.NoError(t, err)
	top := res.snap.Top(1)
	require.Len(t, top, 1)
	assert.True(t, strings.HasSuffix(top[0].Site.Location().Function, ".(*agent).rebuildMask"), top[0].Site.String())
	assert.EqualValues(t, 8*24, top[0].LiveCount, "one mask per step is kept")

	var out bytes.Buffer
	printReport(&out, o, res)
	table := out.String()[strings.Index(out.String(), "top sites by live bytes"):]
	firstRow := strings.SplitN(table, "\n", 5)[2:4]
	assert.Contains(t, firstRow[0], ".(*agent).rebuildMask")
	assert.Contains(t, firstRow[1], "agent.go:")
}

func TestFixedRunEndsWithNothingLive(t *testing.T) {
	o, err := parseFlags([]string{"-fixed", "-requests", "16"}, &bytes.Buffer{})
	require.NoError(t, err)
	res, err := simulate(context.Background(), o)
	require.NoError(t, err)
	require.NoError(t, res.err)
	assert.Equal(t, 16, res.served)
	assert.Zero(t, res.snap.Totals.LiveCount)
	assert.Zero(t, res.snap.Totals.LiveBytes)
}

func TestBadFlags(t *testing.T) {
	assert.Error(t, run([]string{"-requests", "0"}, &bytes.Buffer{}))
	assert.Error(t, run([]string{"-nope"}, &bytes.Buffer{}))
}
