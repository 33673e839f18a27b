package shard

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/testkit"
	"github.com/linkraft/linkraft/link"
	"github.com/linkraft/linkraft/raftgroup"
	"github.com/linkraft/linkraft/transport"
)

// BenchmarkLookup is a redirect's read of its link on one replica, in
// parallel as HTTP handlers make it: a cache hit, or (cache of one entry)
// a read of the bbolt file, over 1,000 links; and a code the shard does not
// hold (the negative cache: what a redirect that misses pays).
func BenchmarkLookup(b *testing.B) {
	for _, tc := range []struct {
		name    string
		cache   int
		unknown bool
	}{{"cache-hit", 0, false}, {"bbolt", 1, false}, {"unknown", 0, true}} {
		b.Run(tc.name, func(b *testing.B) {
			m := testkit.Mux(b)
			layer, err := m.Layer(transport.KindRaft, 1)
			if err != nil {
				b.Fatal(err)
			}
			s, err := Open(Config{ID: 0, CacheSize: tc.cache, Group: raftgroup.Config{NodeID: "n1", Dir: b.TempDir(),
				Stream: transport.RaftLayer{Layer: layer}, Timing: raftgroup.FastTiming}})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			if err := s.Group().Bootstrap([]raftgroup.Server{{ID: "n1", Address: m.Addr()}}); err != nil {
				b.Fatal(err)
			}
			if err := s.Group().WaitReady(testkit.Context(b, 10*time.Second)); err != nil {
				b.Fatal(err)
			}
			codes := make([]string, 1000)
			for i := range codes {
				codes[i] = fmt.Sprintf("c%05d", i)
				if _, err := apply(testkit.Context(b, 10*time.Second), s, (&command.CreateIfAbsent{Code: codes[i], Now: time.Now().UTC(), Request: link.CreateRequest{URL: "https://example.com/" + codes[i]}}).Encode()); err != nil {
					b.Fatal(err)
				}
			}
			for _, c := range codes { // warm the cache
				if _, err := s.Lookup(c, true); err != nil {
					b.Fatal(err)
				}
			}
			if tc.unknown {
				for i := range codes {
					codes[i] = fmt.Sprintf("u%05d", i)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					l, err := s.Lookup(codes[i%len(codes)], true)
					if tc.unknown {
						if !errors.Is(err, link.ErrNotFound) {
							b.Fatal(err)
						}
						i += 7
						continue
					}
					if err != nil || l == nil {
						b.Fatal(err)
					}
					i += 7
				}
			})
		})
	}
}
