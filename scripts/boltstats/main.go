// Command boltstats prints, for the bbolt files named (a stopped node's
// shards/*/state.db), each top-level bucket's keys, the bytes of pages it
// holds and how full they are, summed over the files: where a data dir's
// bytes per link go. The files are opened read-only; a running node holds
// its files locked, so stop it first.
//
//	go run ./scripts/boltstats DATA_DIR/shards/*/state.db
package main

import (
	"fmt"
	"log"
	"os"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

func main() {
	if len(os.Args) < 2 {
		log.Fatal("usage: boltstats FILE...")
	}
	tot := map[string]*bolt.BucketStats{}
	for _, path := range os.Args[1:] {
		db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
		if err != nil {
			log.Fatalf("%s: %v", path, err)
		}
		err = db.View(func(tx *bolt.Tx) error {
			return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
				t := tot[string(name)]
				if t == nil {
					t = &bolt.BucketStats{}
					tot[string(name)] = t
				}
				t.Add(b.Stats())
				return nil
			})
		})
		db.Close()
		if err != nil {
			log.Fatalf("%s: %v", path, err)
		}
	}
	names := make([]string, 0, len(tot))
	for n := range tot {
		names = append(names, n)
	}
	slices.Sort(names)
	fmt.Println("| bucket | keys | pages, MB | in use, MB | fill |")
	fmt.Println("|---|---|---|---|---|")
	var all, used int
	for _, n := range names {
		s := tot[n]
		alloc, inuse := s.BranchAlloc+s.LeafAlloc, s.BranchInuse+s.LeafInuse
		if s.KeyN == 0 && alloc == 0 {
			continue
		}
		all, used = all+alloc, used+inuse
		fmt.Printf("| %s | %d | %.1f | %.1f | %.0f %% |\n", n, s.KeyN, float64(alloc)/1e6, float64(inuse)/1e6, 100*float64(inuse)/float64(max(alloc, 1)))
	}
	fmt.Printf("| all | | %.1f | %.1f | %.0f %% |\n", float64(all)/1e6, float64(used)/1e6, 100*float64(used)/float64(max(all, 1)))
}
