package mask

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/tensorlife/tensorlife/tensor"
)

// FuzzBuilders checks every builder against the host reference for random
// shapes, lengths and dtypes, bad lengths included: a bad input must be
// refused with ErrInvalidLength, a good one must match byte for byte, and
// nothing may stay live either way.
func FuzzBuilders(f *testing.F) {
	f.Add(uint8(0), uint8(1), uint8(0), uint64(1))
	f.Add(uint8(2), uint8(4), uint8(9), uint64(7))
	f.Add(uint8(4), uint8(8), uint8(48), uint64(42))
	f.Add(uint8(1), uint8(3), uint8(1), uint64(99))
	f.Fuzz(func(t *testing.T, dtSel, batchSel, seqSel uint8, seed uint64) {
		dt := maskDTypes[int(dtSel)%len(maskDTypes)]
		batch := 1 + int(batchSel)%8
		seqLen := int(seqSel) % 49
		rng := rand.New(rand.NewPCG(seed, seed>>1))

		lengths := make([]int, batch)
		bad := false
		for i := range lengths {
			lengths[i] = rng.IntN(seqLen + 1)
			if rng.IntN(16) == 0 { // sometimes out of range
				lengths[i] = seqLen + 1 + rng.IntN(3)
				bad = true
			}
		}
		tokens := make([][]int32, batch)
		for i := range tokens {
			tokens[i] = make([]int32, seqLen)
			for j := range tokens[i] {
				tokens[i][j] = int32(rng.IntN(4)) // pad id 0 about a quarter of the time
			}
		}

		e := newEnv(t)
		b := e.builder(t, DType(dt))
		ctx := context.Background()
		check := func(name string, m *tensor.Tensor, err error, want []byte, wantErr bool) {
			t.Helper()
			if wantErr {
				if !errors.Is(err, ErrInvalidLength) {
					t.Fatalf("%s(%v, %d): got error %v, want ErrInvalidLength", name, lengths, seqLen, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			got := readBytes(t, m)
			if err := m.Free(); err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Fatalf("%s %v batch %d seq %d lengths %v: got %v, want %v", name, dt, batch, seqLen, lengths, got, want)
			}
		}

		m, err := b.Padding(ctx, lengths, seqLen)
		check("Padding", m, err, refPaddingOK(dt, lengths, seqLen, bad), bad)
		m, err = b.CausalPadding(ctx, lengths, seqLen)
		check("CausalPadding", m, err, refCausalPaddingOK(dt, lengths, seqLen, bad), bad)
		m, err = b.Causal(ctx, seqLen)
		check("Causal", m, err, refCausal(dt, seqLen), false)
		m, err = b.PaddingFromTokens(ctx, tokens, 0)
		check("PaddingFromTokens", m, err, refTokens(dt, tokens, 0), false)

		// The same attention pattern, grown token by token.
		g, err := b.NewGrowable(ctx, batch, 1+rng.IntN(4))
		if err != nil {
			t.Fatal(err)
		}
		var rows [][]bool
		for j := range seqLen {
			row := make([]bool, batch)
			for s := range row {
				row[s] = tokens[s][j] != 0
			}
			if err := g.AppendValid(row); err != nil {
				t.Fatal(err)
			}
			rows = append(rows, row)
		}
		v, err := g.View()
		if err != nil {
			t.Fatal(err)
		}
		check("Growable", v, nil, refGrowable(dt, rows), false)
		if err := g.Free(); err != nil {
			t.Fatal(err)
		}
	})
}

func refPaddingOK(dt tensor.DType, lengths []int, seqLen int, bad bool) []byte {
	if bad {
		return nil
	}
	return refPadding(dt, lengths, seqLen)
}

func refCausalPaddingOK(dt tensor.DType, lengths []int, seqLen int, bad bool) []byte {
	if bad {
		return nil
	}
	return refCausalPadding(dt, lengths, seqLen)
}
