package devflag_test

import (
	"bytes"
	"flag"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/devflag"
	"github.com/tensorlife/tensorlife/tensor"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want devflag.Spec
	}{
		{"host", devflag.Spec{}},
		{"cuda:0", devflag.Spec{CUDA: true}},
		{"cuda:7", devflag.Spec{CUDA: true, Ordinal: 7}},
		{"cuda:15", devflag.Spec{CUDA: true, Ordinal: 15}},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := devflag.Parse(tc.in)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.in, got.String(), "String reads back")
		})
	}
	for _, bad := range []string{"", "Host", "host:0", "cuda", "cuda:", "cuda:-1", "cuda:+1", "cuda:01",
		"cuda:x", "cuda:1.0", "cuda: 1", "gpu:0", "cuda:99999999999999999999"} {
		t.Run("bad "+bad, func(t *testing.T) {
			_, err := devflag.Parse(bad)
			require.ErrorIs(t, err, devflag.ErrInvalidDevice)
			assert.Contains(t, err.Error(), `"`+bad+`"`, "the error quotes the value")
		})
	}
}

func TestFlag(t *testing.T) {
	var out bytes.Buffer
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(&out)
	var spec devflag.Spec
	devflag.Var(fs, &spec)

	require.NoError(t, fs.Parse(nil))
	assert.Equal(t, devflag.Spec{}, spec, "host by default")
	require.NoError(t, fs.Parse([]string{"-device", "cuda:2"}))
	assert.Equal(t, devflag.Spec{CUDA: true, Ordinal: 2}, spec)

	// The flag package keeps only the text of Set's error.
	err := fs.Parse([]string{"-device=gpu"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `invalid device "gpu": want host or cuda:N`)
	assert.Contains(t, out.String(), `invalid value "gpu" for flag -device`)

	out.Reset()
	fs.PrintDefaults()
	assert.Contains(t, out.String(), "-device value")
	assert.Contains(t, out.String(), "cuda:N")
}

func TestOpenHost(t *testing.T) {
	dev, err := devflag.Open(devflag.Spec{}, 1<<20)
	require.NoError(t, err)
	assert.Equal(t, "host", dev.Name())
	p, err := dev.Alloc(4096)
	require.NoError(t, err)
	assert.Equal(t, int64(4096), dev.Used())
	assert.Equal(t, 1, dev.Blocks())
	_, err = dev.Alloc(1 << 20)
	assert.ErrorIs(t, err, tensor.ErrOutOfMemory, "the capacity is the device's size")
	require.NoError(t, dev.Free(p, 4096))
	assert.Zero(t, dev.Used())
	assert.NoError(t, dev.Close())

	for _, spec := range []devflag.Spec{{}, {CUDA: true}} {
		_, err = devflag.Open(spec, 0)
		assert.ErrorIs(t, err, tensor.ErrInvalidSize, "%s with capacity 0", spec)
	}
}
