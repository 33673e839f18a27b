// Command logbench measures Raft log appends of many groups on one node:
// each group on its own raft-boltdb file (linknode below feature level 8)
// against the node's shared log (raftgroup/nodelog, linknode as shipped):
// one append-only log whose committer writes every group's pending appends
// as one write and one fdatasync.
// Each group has one appender, as a Raft leader has (it appends one batch
// at a time); a batch is -batch entries of -size bytes. With -nodes N the
// groups are split over N shared logs, each with its own committer: N
// nodes on one disk. It prints appends/s, entries/s and the p50/p99
// latency of an append and the CPU time spent per append, per layout and
// group count. Files live in a
// temporary directory under -dir (default: the current one, the filesystem
// the data directories use) and are removed. Bounded: -duration per run.
//
//	go run ./scripts/logbench [-dir .] [-groups 1,8,24] [-nodes 1] [-batch 4] [-size 150] [-duration 5s]
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/raftgroup/nodelog"
)

func main() {
	dir := flag.String("dir", ".", "directory on the filesystem to measure")
	groupList := flag.String("groups", "1,8,24", "group counts to measure (comma-separated)")
	batch := flag.Int("batch", 4, "entries per append")
	size := flag.Int("size", 150, "bytes per entry (a create's command is about 150)")
	duration := flag.Duration("duration", 5*time.Second, "length of each run")
	nodes := flag.Int("nodes", 1, "shared files the groups are split over (nodes on one disk)")
	layouts := flag.String("layouts", "per-group,shared", "layouts to measure: per-group (a raft-boltdb file per group), shared (nodelog, as shipped)")
	flag.Parse()
	tmp, err := os.MkdirTemp(*dir, "logbench-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	fmt.Println("| layout | groups | appends/s | entries/s | append p50 | append p99 | CPU per append |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, g := range strings.Split(*groupList, ",") {
		groups, err := strconv.Atoi(strings.TrimSpace(g))
		if err != nil || groups < 1 {
			log.Fatalf("-groups: %q", g)
		}
		for _, layout := range strings.Split(*layouts, ",") {
			d := filepath.Join(tmp, fmt.Sprintf("%s-%d", layout, groups))
			if err := os.Mkdir(d, 0o750); err != nil {
				log.Fatal(err)
			}
			cpu0 := cpuTime()
			r, err := run(d, layout, groups, *nodes, *batch, *size, *duration)
			cpu := cpuTime() - cpu0
			if err != nil {
				log.Fatal(err)
			}
			secs := duration.Seconds()
			name := layout
			if layout != "per-group" && *nodes > 1 {
				name = fmt.Sprintf("%s, %d files", layout, *nodes)
			}
			fmt.Printf("| %s | %d | %.0f | %.0f | %.2f ms | %.2f ms | %.0f µs |\n", name, groups,
				float64(len(r))/secs, float64(len(r)**batch)/secs, ms(r, 0.50), ms(r, 0.99), float64(cpu.Microseconds())/float64(max(len(r), 1)))
		}
	}
}

// appender stores one group's batches.
type appender interface {
	StoreLogs([]*raft.Log) error
}

// run appends to groups logs in the layout for d, and returns every
// append's latency.
func run(dir, layout string, groups, nodes, batch, size int, d time.Duration) ([]time.Duration, error) {
	stores := make([]appender, groups)
	var closeAll func()
	switch layout {
	case "per-group":
		var opened []*raftboltdb.BoltStore
		for i := range stores {
			s, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, fmt.Sprintf("raft-%d.db", i)),
				BoltOptions: &bolt.Options{NoFreelistSync: true, FreelistType: bolt.FreelistMapType}})
			if err != nil {
				return nil, err
			}
			opened = append(opened, s)
			stores[i] = s
		}
		closeAll = func() {
			for _, s := range opened {
				_ = s.Close()
			}
		}
	case "shared":
		cs := make([]*nodelog.Store, max(nodes, 1))
		for n := range cs {
			c, err := nodelog.Open(nodelog.Config{Path: filepath.Join(dir, fmt.Sprintf("raft-log-%d", n))})
			if err != nil {
				return nil, err
			}
			cs[n] = c
		}
		for i := range stores {
			stores[i] = cs[i%len(cs)].Log(fmt.Sprintf("shards/%d", i))
		}
		closeAll = func() {
			for _, c := range cs {
				_ = c.Close()
			}
		}
	default:
		return nil, fmt.Errorf("-layouts: unknown layout %q", layout)
	}
	defer closeAll()
	var (
		mu   sync.Mutex
		lat  []time.Duration
		errs []error
		wg   sync.WaitGroup
	)
	deadline := time.Now().Add(d)
	for _, s := range stores {
		wg.Go(func() {
			var mine []time.Duration
			data := make([]byte, size)
			for index := uint64(1); time.Now().Before(deadline); {
				logs := make([]*raft.Log, batch)
				for j := range logs {
					logs[j] = &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}
					index++
				}
				start := time.Now()
				if err := s.StoreLogs(logs); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(start))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(lat)
	return lat, errors.Join(errs...)
}

// cpuTime is the CPU time (user and system) the process has used: the
// log's own cost, which on a machine whose nodes are CPU-bound is what a
// commit costs them.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ms is the q quantile of sorted latencies, in milliseconds.
func ms(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return float64(sorted[int(q*float64(len(sorted)-1))]) / 1e6
}
