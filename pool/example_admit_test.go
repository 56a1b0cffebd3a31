package pool_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// A service admits each request for its size before it makes a tensor:
// with no history a request reserves the fallback stated for its size;
// once its kind has seen requests of that size, what they held.
func ExamplePool_AdmitSized() {
	dev, _ := tensor.NewHostDevice(64 << 20)
	tracker, _ := track.New(track.Name("example"))
	p, _ := pool.New(dev, pool.Budget(8<<20), pool.Tracker(tracker))
	defer p.Close()

	// serve runs one request of tokens tokens: 4 KiB of KV cache each.
	serve := func(tokens int64) (*pool.Admission, error) {
		ctx, adm, err := p.AdmitSized(context.Background(), "route=/generate", tokens, tokens*8<<10) // worst case: 8 KiB a token
		if err != nil {
			return nil, err
		}
		defer adm.End()
		kv, err := tensor.New(ctx, p, tensor.Uint8, int(tokens)*4096)
		if err != nil {
			return adm, err
		}
		return adm, kv.Free()
	}
	adm, _ := serve(256)
	fmt.Printf("first request: %d KiB reserved (fallback %v)\n", adm.Reserved>>10, adm.Fallback)
	for i := range pool.AdmitHistory {
		_, _ = serve(int64(64 + 16*(i%12)))
	}
	adm, _ = serve(256)
	fmt.Printf("with history:  %d KiB reserved (fallback %v)\n", adm.Reserved>>10, adm.Fallback)

	_, err := serve(2048) // 16 MiB in the worst case: more than the budget
	var refused *pool.AdmissionError
	if errors.As(err, &refused) {
		fmt.Printf("refused: %d units need %d MiB, headroom %d MiB\n", refused.Units, refused.Peak>>20, refused.Headroom>>20)
	}
	// Output:
	// first request: 2048 KiB reserved (fallback true)
	// with history:  1024 KiB reserved (fallback false)
	// refused: 2048 units need 16 MiB, headroom 8 MiB
}
