package fsm

import (
	"fmt"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/link"
)

func benchCreate(i int) *command.CreateIfAbsent {
	return &command.CreateIfAbsent{Code: fmt.Sprintf("b%06d", i), URL: "https://www.example.com/some/path/of/a/typical/length?utm_source=x",
		Owner: "alice", Now: t0, Redirect: 302, Nonce: uint64(i) + 1}
}

// BenchmarkCreateBatchApply applies Raft batches of new links as the shard
// gets them under concurrent creates (raft.BatchingFSM: one bbolt
// transaction and one fsync per batch). Reported per link.
func BenchmarkCreateBatchApply(b *testing.B) {
	for _, size := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			f := mustShard(b, ShardConfig{})
			logs := make([]*raft.Log, 0, size)
			b.ReportAllocs()
			idx := uint64(0)
			for i := 0; i < b.N; i += size {
				logs = logs[:0]
				for j := 0; j < size; j++ {
					idx++
					logs = append(logs, &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: benchCreate(i + j).Encode()})
				}
				for _, r := range f.ApplyBatch(logs) {
					if res, ok := r.(*Result); !ok || res.Err != nil {
						b.Fatalf("apply: %#v", r)
					}
				}
			}
		})
	}
}

// BenchmarkListScan is a listing whose filter (q) no link passes, over
// 50,000 links: what one shard spends on a page at the scan budget the
// cluster asks for (link.ListQuery.Scan), and without one.
func BenchmarkListScan(b *testing.B) {
	f := mustShard(b, ShardConfig{})
	const n, batch = 50000, 500
	idx := uint64(0)
	for i := 0; i < n; i += batch {
		logs := make([]*raft.Log, 0, batch)
		for j := range batch {
			idx++
			logs = append(logs, &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: benchCreate(i + j).Encode()})
		}
		f.ApplyBatch(logs)
	}
	for _, scan := range []int{10000, 0} {
		b.Run(fmt.Sprintf("scan=%d", scan), func(b *testing.B) {
			q := link.ListQuery{Text: "no-such-text", Limit: 100, Desc: true, Scan: scan}
			for b.Loop() {
				res, err := f.ListLinks(q)
				if err != nil || len(res.Links) != 0 || (scan > 0) != (res.Stop != nil) {
					b.Fatalf("%d links, stop %v, %v", len(res.Links), res.Stop, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/page")
		})
	}
}
