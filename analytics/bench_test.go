package analytics

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/linkraft/linkraft/fsm"
)

// BenchmarkRecordAndAggregate is the whole per-click cost of analytics on
// the node: Record (what the redirect handler pays) plus the pipeline's
// enrichment and aggregation.
func BenchmarkRecordAndAggregate(b *testing.B) {
	key := []byte("cluster key")
	saltFn := func(day time.Time) []byte {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(day.Format("2006-01-02")))
		return m.Sum(nil)
	}
	p, err := New(Config{Node: "n1", Shard: func(string) int { return 0 }, Salt: saltFn, FlushInterval: time.Hour,
		Submit: func(context.Context, int, *fsm.ClickBatch) error { return nil }})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(context.Background())
	codes := make([]string, 1000)
	for i := range codes {
		codes[i] = fmt.Sprintf("c%d", i)
	}
	now := time.Now()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		p.queued.Add(1) // as Record does
		p.add(Click{Code: codes[i%len(codes)], Time: now, IP: netip.AddrFrom4([4]byte{198, 51, byte(i >> 8), byte(i)}), UA: chromeUA, Referer: "https://news.example/item"})
	}
}

func BenchmarkRecordOnly(b *testing.B) {
	p, err := New(Config{Node: "n1", Shard: func(string) int { return 0 }, Capacity: 1 << 20, FlushInterval: time.Hour,
		Submit: func(context.Context, int, *fsm.ClickBatch) error { return nil }})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(context.Background())
	c := Click{Code: "abc", Time: time.Now(), UA: chromeUA}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p.Record(c)
		}
	})
}
