package analytics

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/link"
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
	p, err := New(Config{Node: "n1", Shard: func(string) command.ShardID { return 0 }, Salt: saltFn, FlushInterval: time.Hour,
		Submit: func(context.Context, command.ShardID, *command.ClickBatch) error { return nil }})
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
		c := link.Click{Code: codes[i%len(codes)], Time: now, IP: netip.AddrFrom4([4]byte{198, 51, byte(i >> 8), byte(i)}), UA: chromeUA, Referer: "https://news.example/item"}
		p.queued.Add(1) // as Record and drain do
		p.mu.Lock()
		p.add(&c)
		p.queued.Add(-1)
		p.mu.Unlock()
	}
}

func BenchmarkRecordOnly(b *testing.B) {
	p, err := New(Config{Node: "n1", Shard: func(string) command.ShardID { return 0 }, Capacity: 1 << 20, FlushInterval: time.Hour,
		Submit: func(context.Context, command.ShardID, *command.ClickBatch) error { return nil }})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(context.Background())
	c := link.Click{Code: "abc", Time: time.Now(), UA: chromeUA}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p.Record(c)
		}
	})
}

// BenchmarkClickPath is the whole cost of one click on a single node (the
// hand-off from the handler included), on
// the redirect benchmark's load (scripts/bench-analytics.sh: 10,000 links,
// 15,000 clicks a second): enrichment and aggregation, the batch of every
// second encoded and applied by a real shard state machine (bbolt,
// fsync), and the raw visit written. The Raft log append is not in it.
// Codes are drawn round-robin (flat) or Zipf-like (s = 1.1).
func BenchmarkClickPath(b *testing.B) {
	const links, perSecond = 10000, 15000
	codes := make([]string, links)
	for i := range codes {
		codes[i] = fmt.Sprintf("c%05d", i)
	}
	for _, mode := range []string{"flat", "zipf"} {
		b.Run(mode, func(b *testing.B) {
			sub := newFSM(b, codes...)
			vs, err := OpenVisitStore(filepath.Join(b.TempDir(), "visits.db"), VisitLimits{})
			if err != nil {
				b.Fatal(err)
			}
			defer vs.Close()
			p, err := New(Config{Node: "n1", Shard: func(string) command.ShardID { return 0 }, Salt: salt, FlushInterval: time.Hour,
				Submit: sub.submit, Visits: vs, Capacity: 1 << 20})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close(context.Background())
			rng := rand.New(rand.NewPCG(1, 1))
			zipf := rand.NewZipf(rng, 1.1, 1, links-1)
			now := time.Now()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				c := i % links
				if mode == "zipf" {
					c = int(zipf.Uint64())
				}
				if !p.Record(link.Click{Code: codes[c], Time: now, IP: netip.AddrFrom4([4]byte{127, 0, 0, 1}), UA: chromeUA, Referer: "https://news.example/item"}) {
					b.Fatal("click dropped")
				}
				if (i+1)%perSecond == 0 {
					p.drain()
					p.flush(true)
					if (i+1)%(5*perSecond) == 0 {
						p.writeVisits()
					}
				}
			}
			p.drain()
			p.flush(true)
			p.writeVisits()
		})
	}
}

// BenchmarkVisitWriteLateInTheHour is one write of raw visits (10,000
// visits of 10,000 codes: five seconds of a busy node) into an hour that
// already holds 40 such writes: the cost of a write must not grow with
// the hour (it did while every write's records went into one B+tree keyed
// code first).
func BenchmarkVisitWriteLateInTheHour(b *testing.B) {
	s, err := OpenVisitStore(filepath.Join(b.TempDir(), "visits.db"), VisitLimits{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	hour := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	write := func(w int) {
		var vb VisitBatch
		for i := range 10000 {
			vb.Append(&link.Visit{Code: fmt.Sprintf("c%05d", i), Time: hour.Add(time.Duration(w)*5*time.Second + time.Duration(i)*time.Microsecond),
				Node: "n1", Network: "192.0.2.0/24", Country: "FR", UserAgent: chromeUA, Referer: "https://news.example/item"})
		}
		if _, err := s.AddBatch(&vb); err != nil {
			b.Fatal(err)
		}
	}
	for w := range 40 {
		write(w)
	}
	b.ResetTimer()
	for i := range b.N {
		write(40 + i%600)
	}
}
