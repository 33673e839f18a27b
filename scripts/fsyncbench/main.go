// Command fsyncbench measures how many 4 KiB append+fdatasync rounds per
// second this machine's disk completes with 1, 2, 8, 24 and 48 writers, each
// on its own file: one writer is the latency of a single commit, many
// writers show how far concurrent commits (a node's shard groups, or three
// nodes on one disk) scale. Files live in a temporary directory under -dir
// (default: the current one, so the filesystem measured is the one the
// data directories use) and are removed. Bounded: -duration per step.
//
//	go run ./scripts/fsyncbench [-dir .] [-duration 3s]
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	dir := flag.String("dir", ".", "directory on the filesystem to measure")
	duration := flag.Duration("duration", 3*time.Second, "length of each step")
	flag.Parse()
	tmp, err := os.MkdirTemp(*dir, "fsyncbench-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	fmt.Println("| writers | fdatasync/s |")
	fmt.Println("|---|---|")
	for _, n := range []int{1, 2, 8, 24, 48} {
		var ops atomic.Int64
		var wg sync.WaitGroup
		deadline := time.Now().Add(*duration)
		for i := 0; i < n; i++ {
			wg.Go(func() {
				f, err := os.Create(filepath.Join(tmp, fmt.Sprint(i)))
				if err != nil {
					log.Fatal(err)
				}
				defer f.Close()
				buf := make([]byte, 4096)
				for off := int64(0); time.Now().Before(deadline) && off < 1<<30; off += int64(len(buf)) {
					if _, err := f.WriteAt(buf, off); err != nil {
						log.Fatal(err)
					}
					if err := fdatasync(f); err != nil {
						log.Fatal(err)
					}
					ops.Add(1)
				}
			})
		}
		wg.Wait()
		fmt.Printf("| %d | %.0f |\n", n, float64(ops.Load())/duration.Seconds())
	}
}
