package pprofexport_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pprofexport"
	"github.com/tensorlife/tensorlife/tensor"
)

// keepView frees a tensor but keeps a View of it: the View's line holds the
// memory now.
//
//go:noinline
func keepView(t *testing.T, alloc tensor.Allocator) *tensor.Tensor {
	x, err := tensor.New(context.Background(), alloc, tensor.Float32, 64)
	require.NoError(t, err)
	v, err := x.View(0, 16) // the line a profile must name
	require.NoError(t, err)
	require.NoError(t, x.Free())
	return v
}

// A sample whose tensors' own handles are freed names the owner that still
// holds the memory: -tagfocus held_by=View finds it.
func TestProfileNamesTheHolder(t *testing.T) {
	prog := newProgram(t)
	v := keepView(t, prog.alloc)
	x, err := tensor.New(context.Background(), prog.alloc, tensor.Float32, 8) // held by its own handle
	require.NoError(t, err)

	var buf bytes.Buffer
	require.NoError(t, pprofexport.Write(&buf, prog.tracker.Snapshot()))
	p, err := profile.Parse(&buf)
	require.NoError(t, err)
	inuse := -1
	for i, st := range p.SampleType {
		if st.Type == "inuse_space" {
			inuse = i
		}
	}
	require.GreaterOrEqual(t, inuse, 0)
	var held []string
	unlabelled := 0
	for _, s := range p.Sample {
		if s.Value[inuse] == 0 {
			continue // a site with allocations but nothing live now
		}
		if h := s.Label[pprofexport.LabelHeldBy]; len(h) > 0 {
			held = append(held, h...)
		} else {
			unlabelled++
		}
	}
	require.Len(t, held, 1, "one sample is held by a View")
	assert.True(t, strings.HasPrefix(held[0], "a View made at heldby_test.go:"), held[0])
	assert.Contains(t, held[0], "keepView")
	assert.Equal(t, 1, unlabelled, "a tensor held by its own handle carries no held_by")
	require.NoError(t, v.Free())
	require.NoError(t, x.Free())
}
