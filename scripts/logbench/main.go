// Command logbench measures the lever of issue 28's part 3 before it is
// built: Raft log appends of many groups on one node, each group on its own
// raft-boltdb file (as linknode stores them now) against every group in
// one bbolt file whose appends a single committer gathers into one
// transaction (one commit, so one pair of fdatasyncs, for every group's
// pending appends). Each group has one appender, as a Raft leader has (it
// appends one batch at a time); a batch is -batch entries of -size bytes.
// With -nodes N the groups are split over N shared files, each with its
// own committer: N nodes on one disk. It prints appends/s, entries/s and
// the p50/p99 latency of an append, per layout and group count. Files live in a temporary directory under -dir
// (default: the current one, the filesystem the data directories use) and
// are removed. Bounded: -duration per run.
//
//	go run ./scripts/logbench [-dir .] [-groups 1,8,24] [-nodes 1] [-batch 4] [-size 150] [-duration 5s]
package main

import (
	"encoding/binary"
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
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	bolt "go.etcd.io/bbolt"
)

func main() {
	dir := flag.String("dir", ".", "directory on the filesystem to measure")
	groupList := flag.String("groups", "1,8,24", "group counts to measure (comma-separated)")
	batch := flag.Int("batch", 4, "entries per append")
	size := flag.Int("size", 150, "bytes per entry (a create's command is about 150)")
	duration := flag.Duration("duration", 5*time.Second, "length of each run")
	nodes := flag.Int("nodes", 1, "shared files the groups are split over (nodes on one disk)")
	flag.Parse()
	tmp, err := os.MkdirTemp(*dir, "logbench-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	fmt.Println("| layout | groups | appends/s | entries/s | append p50 | append p99 |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, g := range strings.Split(*groupList, ",") {
		groups, err := strconv.Atoi(strings.TrimSpace(g))
		if err != nil || groups < 1 {
			log.Fatalf("-groups: %q", g)
		}
		for _, layout := range []string{"per-group", "shared"} {
			d := filepath.Join(tmp, fmt.Sprintf("%s-%d", layout, groups))
			if err := os.Mkdir(d, 0o750); err != nil {
				log.Fatal(err)
			}
			r, err := run(d, layout, groups, *nodes, *batch, *size, *duration)
			if err != nil {
				log.Fatal(err)
			}
			secs := duration.Seconds()
			name := layout
			if layout == "shared" && *nodes > 1 {
				name = fmt.Sprintf("shared, %d files", *nodes)
			}
			fmt.Printf("| %s | %d | %.0f | %.0f | %.2f ms | %.2f ms |\n", name, groups,
				float64(len(r))/secs, float64(len(r)**batch)/secs, ms(r, 0.50), ms(r, 0.99))
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
		cs := make([]*committer, max(nodes, 1))
		for n := range cs {
			c, err := newCommitter(filepath.Join(dir, fmt.Sprintf("raft-%d.db", n)))
			if err != nil {
				return nil, err
			}
			cs[n] = c
		}
		for i := range stores {
			stores[i] = cs[i%len(cs)].group(i)
		}
		closeAll = func() {
			for _, c := range cs {
				c.close()
			}
		}
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

// ms is the q quantile of sorted latencies, in milliseconds.
func ms(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return float64(sorted[int(q*float64(len(sorted)-1))]) / 1e6
}

// committer is the shared layout: every group's appends in one bbolt file,
// a bucket per group, gathered by one goroutine into one transaction.
type committer struct {
	db   *bolt.DB
	reqs chan request
	done chan struct{}
}

// request is one group's append waiting for the next commit.
type request struct {
	group int
	logs  []*raft.Log
	err   chan error
}

func newCommitter(path string) (*committer, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return nil, err
	}
	c := &committer{db: db, reqs: make(chan request, 1024), done: make(chan struct{})}
	go c.loop()
	return c, nil
}

// loop commits what is waiting, all of it in one transaction, until close.
func (c *committer) loop() {
	defer close(c.done)
	for first := range c.reqs {
		pending := []request{first}
	gather:
		for {
			select {
			case r, ok := <-c.reqs:
				if !ok {
					break gather
				}
				pending = append(pending, r)
			default:
				break gather
			}
		}
		err := c.db.Update(func(tx *bolt.Tx) error {
			for _, r := range pending {
				b, err := tx.CreateBucketIfNotExists([]byte("logs-" + strconv.Itoa(r.group)))
				if err != nil {
					return err
				}
				for _, l := range r.logs {
					// The value as raft-boltdb stores it would be msgpack;
					// the bytes written are what matters here.
					v := binary.BigEndian.AppendUint64(nil, l.Term)
					if err := b.Put(binary.BigEndian.AppendUint64(nil, l.Index), append(v, l.Data...)); err != nil {
						return err
					}
				}
			}
			return nil
		})
		for _, r := range pending {
			r.err <- err
		}
	}
}

// group is group i's view of the shared log.
func (c *committer) group(i int) appender { return groupLog{c, i} }

func (c *committer) close() {
	close(c.reqs)
	<-c.done
	_ = c.db.Close()
}

// groupLog appends through the committer.
type groupLog struct {
	c *committer
	i int
}

// StoreLogs waits for the commit that holds logs.
func (g groupLog) StoreLogs(logs []*raft.Log) error {
	r := request{group: g.i, logs: logs, err: make(chan error, 1)}
	g.c.reqs <- r
	return <-r.err
}
