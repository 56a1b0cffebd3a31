package devflag_test

import (
	"bytes"
	"flag"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/devflag"
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
	var list devflag.List
	devflag.Var(fs, &list)

	require.NoError(t, fs.Parse(nil))
	assert.Equal(t, []devflag.Spec{{}}, list.Specs(), "host by default")
	assert.Equal(t, "host", list.String())
	require.NoError(t, fs.Parse([]string{"-device", "cuda:2"}))
	assert.Equal(t, devflag.List{{CUDA: true, Ordinal: 2}}, list)
	require.NoError(t, fs.Parse([]string{"-device", "host,host"}))
	assert.Equal(t, devflag.List{{}, {}}, list)

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

func TestParseList(t *testing.T) {
	for _, tc := range []struct {
		in    string
		want  devflag.List
		names []string
	}{
		{"host", devflag.List{{}}, []string{"host"}},
		{"cuda:1", devflag.List{{CUDA: true, Ordinal: 1}}, []string{"cuda:1"}},
		{"host,host", devflag.List{{}, {}}, []string{"host:0", "host:1"}},
		{"host,cuda:0,host", devflag.List{{}, {CUDA: true}, {}}, []string{"host:0", "cuda:0", "host:1"}},
		{"cuda:0,host", devflag.List{{CUDA: true}, {}}, []string{"cuda:0", "host"}},
		{"cuda:1,cuda:0", devflag.List{{CUDA: true, Ordinal: 1}, {CUDA: true}}, []string{"cuda:1", "cuda:0"}},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := devflag.ParseList(tc.in)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.in, got.String(), "String reads back")
			assert.Equal(t, tc.names, got.Names())
		})
	}
	assert.Equal(t, []string{"host"}, devflag.List(nil).Names(), "the zero List is one host device")

	for _, bad := range []string{"", ",", "host,", ",host", "host,,host", "host;host", "cuda:0,cuda:0",
		"host,gpu", strings.Repeat("host,", devflag.MaxDevices) + "host"} {
		t.Run("bad "+bad, func(t *testing.T) {
			_, err := devflag.ParseList(bad)
			require.ErrorIs(t, err, devflag.ErrInvalidDevice)
		})
	}
	_, err := devflag.ParseList(strings.TrimSuffix(strings.Repeat("host,", devflag.MaxDevices), ","))
	assert.NoError(t, err, "MaxDevices entries are allowed")
}

// Two host entries are two devices of their own, each of the capacity,
// named apart so every report splits them.
func TestOpenAllHosts(t *testing.T) {
	list, err := devflag.ParseList("host,host")
	require.NoError(t, err)
	devs, err := devflag.OpenAll(list, 1<<20)
	require.NoError(t, err)
	require.Len(t, devs, 2)
	assert.Equal(t, "host:0", devs[0].Name())
	assert.Equal(t, "host:1", devs[1].Name())
	_, err = devs[0].Alloc(1 << 20)
	require.NoError(t, err)
	assert.Zero(t, devs[1].Used(), "the devices share nothing")
	_, err = devs[1].Alloc(4096)
	assert.NoError(t, err)
	assert.NoError(t, devflag.CloseAll(devs))

	_, err = devflag.OpenAll(list, 0)
	assert.ErrorIs(t, err, tensor.ErrInvalidSize)
	single, err := devflag.OpenAll(nil, 1<<20)
	require.NoError(t, err)
	require.Len(t, single, 1)
	assert.Equal(t, "host", single[0].Name(), "one host device keeps its name")
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
