package pprofexport_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pprofexport"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// hostileAllocator is a part of the tracker whose every method panics.
type hostileAllocator struct{ _ int }

func (*hostileAllocator) PartInfo() track.PartInfo { panic("hostile PartInfo") }

// The profile handler reads snapshots only: a tracker's hostile parts
// neither reach it nor fail a request.
func TestHandlerSurvivesHostileParts(t *testing.T) {
	tr, err := track.New()
	require.NoError(t, err)
	part := &hostileAllocator{}
	track.Attach(tr, part)
	host, err := tensor.NewHostDevice(1 << 20)
	require.NoError(t, err)
	a, err := tensor.NewDeviceAllocator(host, tr)
	require.NoError(t, err)
	x, err := tensor.New(context.Background(), a, tensor.Uint8, 100)
	require.NoError(t, err)
	h, err := pprofexport.NewHandler(tr)
	require.NoError(t, err)
	for _, query := range []string{"", "?outlived=1", "?debug=1"} {
		rec := httptest.NewRecorder()
		require.NotPanics(t, func() { h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/"+query, nil)) })
		assert.Equal(t, http.StatusOK, rec.Code, query)
		assert.NotEmpty(t, rec.Body.Bytes())
	}
	assert.Zero(t, tr.Totals().PartPanics, "the handler calls no part")
	require.NoError(t, x.Free())
	runtime.KeepAlive(part)
}
