package iso8583_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/processor/iso8583"
)

// BenchmarkAuthorize measures sales through one connection with 64 callers in flight at once, against
// the scripted host on the same machine (which takes its share of the CPU): its sales/s is a floor of
// what the connector can carry.
func BenchmarkAuthorize(b *testing.B) {
	h := newScripted(b)
	h.mu.Lock()
	h.forget = true
	h.mu.Unlock()
	k, _ := newKind(b, nil, iso8583.KindConfig{})
	p := open(b, k, config(h.addr, "TERM0001", "10s"))
	ctx := context.Background()
	var n atomic.Int64
	b.SetParallelism((64 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r, err := p.Authorize(ctx, payment(b, fmt.Sprint("bench", n.Add(1)), cardtest.Visa, 1999, true))
			if err != nil || !r.Approved {
				b.Errorf("Authorize = %+v, %v", r, err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sales/s")
}
