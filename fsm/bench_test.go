package fsm

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/link"
)

func benchCreate(i int) *command.CreateIfAbsent {
	return &command.CreateIfAbsent{Code: fmt.Sprintf("b%06d", i), Now: t0, Nonce: uint64(i) + 1, Request: link.CreateRequest{URL: "https://www.example.com/some/path/of/a/typical/length?utm_source=x", Owner: "alice", Redirect: 302}}
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
					if res, ok := r.(*command.LinkResult); !ok || res.Err != nil {
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
	benchLoad(f, 50000, 500, nil)
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

// benchLoad applies n of benchCreate's links to f, batch to a Raft batch,
// each batch followed by more's command (of the batch's first link
// number), if more is set.
func benchLoad(f *ShardFSM, n, batch int, more func(first int) []byte) {
	idx := uint64(0)
	for i := 0; i < n; i += batch {
		logs := make([]*raft.Log, 0, batch+1)
		for j := range batch {
			idx++
			logs = append(logs, &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: benchCreate(i + j).Encode()})
		}
		if more != nil {
			idx++
			logs = append(logs, &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: more(i)})
		}
		f.ApplyBatch(logs)
	}
}

// putUnclicked puts every link's click entries at 0 clicks, as v3 and v4
// kept them (no link of the benchmarks has clicks).
func putUnclicked(tx *bolt.Tx) error {
	return tx.Bucket(bucketLinks).ForEach(func(k, v []byte) error {
		rv, err := command.ViewRecord(v)
		if err != nil {
			return err
		}
		if err := tx.Bucket(bucketByClicks).Put(clicksKey(ownerPrefix(rv.Owner), 0, rv.Created, k), nil); err != nil {
			return err
		}
		return tx.Bucket(bucketByClicksAll).Put(clicksKey(nil, 0, rv.Created, k), nil)
	})
}

// BenchmarkListByClicks is a page by clicks where every link of a shard
// of 50,000 has clicks: most clicked first reads the click index; least
// clicked first walks the creation index past the clicked links (none
// listed) until its scan budget of 10,000 entries ends the page.
func BenchmarkListByClicks(b *testing.B) {
	f := mustShard(b, ShardConfig{})
	const batch = 500
	benchLoad(f, 50000, batch, func(first int) []byte { // every link of the batch clicked
		deltas := make([]command.ClickDelta, 0, batch)
		for j := range batch {
			deltas = append(deltas, command.ClickDelta{Code: benchCreate(first + j).Code, Delta: command.ClickTotals{Humans: command.Counts{Total: uint64(1 + j%7)}}})
		}
		return (&command.ClickBatch{Node: "n1", Seq: uint64(first/batch + 1), Deltas: deltas}).Encode()
	})
	for _, c := range []struct {
		name  string
		desc  bool
		links int
	}{{"most-clicked", true, 100}, {"least-clicked", false, 0}} {
		b.Run(c.name, func(b *testing.B) {
			q := link.ListQuery{ByClicks: true, Desc: c.desc, Limit: 100, Scan: 10000}
			for b.Loop() {
				res, err := f.ListLinks(q)
				if err != nil || len(res.Links) != c.links || (c.links == 0) != (res.Stop != nil) {
					b.Fatalf("%d links, stop %v, %v", len(res.Links), res.Stop, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/page")
		})
	}
}

// BenchmarkReindexAtOpen is what opening a shard file of 100,000 links
// (two tags each) costs when its indexes come from another version: a
// file of v4 (the version whose click indexes held unclicked links) only
// drops those entries; one of v3 (before tag counts) also gets its counts,
// from its tag index; any older marker means the full rebuild.
func BenchmarkReindexAtOpen(b *testing.B) {
	path := filepath.Join(b.TempDir(), "shard.db")
	f := mustShard(b, ShardConfig{Path: path})
	const n, batch = 100000, 1000
	idx := uint64(0)
	for i := 0; i < n; i += batch {
		logs := make([]*raft.Log, 0, batch)
		for j := range batch {
			idx++
			c := benchCreate(i + j)
			c.Request.Tags = []string{"red", "blue"}
			logs = append(logs, &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: c.Encode()})
		}
		f.ApplyBatch(logs)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, marker string }{{"from-v4", "indexed-v4"}, {"from-v3", "indexed-v3"}, {"full", "indexed-v2"}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				db, err := bolt.Open(path, 0o600, nil)
				if err == nil {
					err = db.Update(func(tx *bolt.Tx) error {
						if err := tx.Bucket(bucketMeta).Delete(keyIndexed); err != nil {
							return err
						}
						if err := putUnclicked(tx); err != nil { // as v3 and v4 kept them
							return err
						}
						return tx.Bucket(bucketMeta).Put([]byte(c.marker), []byte{1})
					})
				}
				if err == nil {
					err = db.Close()
				}
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				f := mustShard(b, ShardConfig{Path: path})
				b.StopTimer()
				counts, err := f.TagCounts("")
				if err != nil || counts["red"] != n {
					b.Fatalf("counts after reopen: %v %v", counts, err)
				}
				if err := f.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "links/s")
		})
	}
}
