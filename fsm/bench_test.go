package fsm

import (
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
)

var sinkAny any

func benchCreate(i int) *CreateIfAbsent {
	return &CreateIfAbsent{Code: fmt.Sprintf("b%06d", i), URL: "https://www.example.com/some/path/of/a/typical/length?utm_source=x",
		Owner: "alice", Now: t0, Redirect: 302, Nonce: uint64(i) + 1}
}

func BenchmarkCreateEncode(b *testing.B) {
	c := benchCreate(1)
	b.ReportAllocs()
	for range b.N {
		sinkAny = c.Encode()
	}
}

func BenchmarkCreateDecode(b *testing.B) {
	data := benchCreate(1).Encode()
	b.ReportAllocs()
	for range b.N {
		v, err := Decode(data)
		if err != nil {
			b.Fatal(err)
		}
		sinkAny = v
	}
}

func BenchmarkLinkDecode(b *testing.B) {
	l := result(b, applyAt(b, mustShard(b, ShardConfig{}), 1, benchCreate(1).Encode())).Link
	data := EncodeLink(l)
	b.ReportAllocs()
	for range b.N {
		v, err := DecodeLink(data)
		if err != nil {
			b.Fatal(err)
		}
		sinkAny = v
	}
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
