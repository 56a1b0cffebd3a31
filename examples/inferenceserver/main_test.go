package main

import (
	"context"
	"flag"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRunRejectsBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want error
	}{
		{[]string{"-budget", "0"}, errBadConfig},
		{[]string{"-budget", "2048", "-capacity", "1024"}, errBadConfig},
		{[]string{"-cache", "-1"}, errBadConfig},
		{[]string{"-drain", "0s"}, errBadConfig},
		{[]string{"-max-tokens", "0"}, errBadConfig},
		{[]string{"-max-prompt", "1048576", "-max-tokens", "1"}, errBadConfig},
		{[]string{"-addr", ""}, errBadConfig},
		{[]string{"-addr", "127.0.0.1:8080", "-debug-addr", "127.0.0.1:8080"}, errBadConfig},
		{[]string{"-max-inflight", "0"}, errBadConfig},
		{[]string{"-cache", "67108864"}, errBadConfig},
		// 64 of the largest request do not fit the default budget.
		{[]string{"-max-inflight", "64"}, errBadConfig},
		{[]string{"-max-prompt", "2048", "-max-tokens", "1024"}, errBadConfig},
		{[]string{"extra"}, errBadConfig},
		{[]string{"-h"}, flag.ErrHelp},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out syncBuffer
			err := run(context.Background(), tc.args, &out)
			assert.ErrorIs(t, err, tc.want)
		})
	}
	var out syncBuffer
	assert.Error(t, run(context.Background(), []string{"-nope"}, &out), "an unknown flag")
	assert.Contains(t, out.String(), "usage: inferenceserver")
}

// TestRunShutsDownWhenCanceled runs the command as main does, with a
// context that is already canceled, as after a SIGTERM.
func TestRunShutsDownWhenCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out syncBuffer
	require.NoError(t, run(ctx, []string{"-addr", "127.0.0.1:0", "-debug-addr", "127.0.0.1:0"}, &out))
	logs := out.String()
	assert.Contains(t, logs, "msg=serving addr=127.0.0.1:")
	assert.Contains(t, logs, "msg=\"shutting down\"")
	assert.Contains(t, logs, "nothing is live")
	assert.Contains(t, logs, "no tensor left live")
}

func TestRunReportsAListenError(t *testing.T) {
	var out syncBuffer
	err := run(context.Background(), []string{"-addr", "127.0.0.1:-1", "-debug-addr", "127.0.0.1:0"}, &out)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "listen")
}
