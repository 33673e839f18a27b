// Package testcluster starts real linknode clusters for tests: in-process
// nodes (cluster.Node) with real Raft groups, bbolt files, memberlist and
// the peer port, all on loopback and in the test's temp dirs, with Raft's
// fast timers. It is imported only by _test files.
package testcluster

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/clusterkey"
	"github.com/linkraft/linkraft/internal/loopback"
	"github.com/linkraft/linkraft/internal/testkit"
	"github.com/linkraft/linkraft/raftgroup"
)

// Options shape a test cluster.
type Options struct {
	// Size is the number of nodes (default 3); Expect the bootstrap-expect
	// they form with (default Size).
	Size, Expect int
	// Shards is the shard count (default 4) and Replicas the replicas per
	// shard (default 3).
	Shards, Replicas int
	// Config, if set, adjusts node i's configuration.
	Config func(i int, cfg *cluster.Config)
}

// Cluster is a set of real nodes. Nodes[i] is nil while node i is stopped;
// Cfgs[i] is its configuration (a restart keeps its peer address).
type Cluster struct {
	tb    testing.TB
	Cfgs  []cluster.Config
	Nodes []*cluster.Node
	// Shards is the cluster's shard count.
	Shards int
}

// Key returns a new cluster key.
func Key(tb testing.TB) *clusterkey.Key {
	tb.Helper()
	k, err := clusterkey.Generate()
	if err != nil {
		tb.Fatal(err)
	}
	return &k
}

// New configures a cluster of opts.Size nodes, none started yet. Every
// node is closed when the test ends.
func New(tb testing.TB, opts Options) *Cluster {
	tb.Helper()
	if opts.Size == 0 {
		opts.Size = 3
	}
	if opts.Expect == 0 {
		opts.Expect = opts.Size
	}
	if opts.Shards == 0 {
		opts.Shards = 4
	}
	if opts.Replicas == 0 {
		opts.Replicas = 3
	}
	c := &Cluster{tb: tb, Nodes: make([]*cluster.Node, opts.Size), Shards: opts.Shards}
	key := Key(tb)
	gossips := make([]string, opts.Size)
	for i := range gossips {
		gossips[i] = loopback.Addr(tb)
	}
	for i := range opts.Size {
		cfg := cluster.Config{
			NodeID: fmt.Sprintf("n%d", i+1), DataDir: tb.TempDir(), RaftAddr: "127.0.0.1:0",
			GossipAddr: gossips[i], FastGossip: true, Join: gossips[:opts.Expect], BootstrapExpect: opts.Expect,
			Shards: opts.Shards, ReplicationFactor: opts.Replicas, Timing: Timing, IDBlockSize: 64,
			ReconcileInterval: 200 * time.Millisecond, ClusterKey: key,
		}
		if os.Getenv("LINKRAFT_TEST_LOG") != "" {
			// Node logs on stderr, for a failing test's story.
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("node", cfg.NodeID)
		}
		if opts.Config != nil {
			opts.Config(i, &cfg)
		}
		c.Cfgs = append(c.Cfgs, cfg)
	}
	tb.Cleanup(c.CloseAll)
	return c
}

// Timing is Raft's timers in test clusters: raftgroup.FastTiming's
// doubled, and the leader lease a millisecond short of the heartbeat
// timeout (raft allows at most the timeout; the millisecond lets a node
// that is its group's only voter stand at once, raftgroup's
// electIfSoleVoter). The tests run under the race detector, two packages
// at a time beside the chaos cases' clusters, on two cores: at 200 ms a
// leader starved of CPU for a moment lost its lease, and a write waited
// out its context for a group with no leader; CI runs still saw
// "leadership lost while committing log" with a 200 ms lease.
var Timing = raftgroup.Timing{
	HeartbeatTimeout:   2 * raftgroup.FastTiming.HeartbeatTimeout,
	ElectionTimeout:    2 * raftgroup.FastTiming.ElectionTimeout,
	LeaderLeaseTimeout: 2*raftgroup.FastTiming.HeartbeatTimeout - time.Millisecond,
	CommitTimeout:      raftgroup.FastTiming.CommitTimeout,
}

// Start starts a cluster of opts and waits until every shard has all its
// replicas and a leader on every node.
func Start(tb testing.TB, opts Options) *Cluster {
	tb.Helper()
	c := New(tb, opts)
	order := make([]int, len(c.Cfgs))
	for i := range order {
		order[i] = i
	}
	c.StartAll(order...)
	c.WaitReplicated(min(len(c.Cfgs), c.Cfgs[0].ReplicationFactor))
	return c
}

// Node opens one node of cfg on loopback with the tests' Raft Timing and a
// new cluster key (unless cfg has one or is insecure); it is closed when
// the test ends, and an error closing it fails the test.
func Node(tb testing.TB, cfg cluster.Config) *cluster.Node {
	tb.Helper()
	cfg.RaftAddr = "127.0.0.1:0"
	cfg.Timing = Timing
	if cfg.DataDir == "" {
		cfg.DataDir = tb.TempDir()
	}
	if cfg.ClusterKey == nil && !cfg.Insecure {
		cfg.ClusterKey = Key(tb)
	}
	n, err := cluster.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Open(ctx); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := n.Close(); err != nil {
			tb.Errorf("close %s: %v", cfg.NodeID, err)
		}
	})
	return n
}

// Start opens node i and blocks until it is open.
func (c *Cluster) Start(i int) {
	c.tb.Helper()
	if err := c.TryStart(i); err != nil {
		c.tb.Fatalf("start n%d: %v", i+1, err)
	}
}

// TryStart opens node i and returns why it did not open.
func (c *Cluster) TryStart(i int) error {
	n, err := cluster.New(c.Cfgs[i])
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := n.Open(ctx); err != nil {
		return err
	}
	c.Nodes[i] = n
	c.Cfgs[i].RaftAddr = n.RaftAddr() // a restart keeps its peer address
	return nil
}

// StartAll opens the nodes concurrently in the given order, each a little
// after the previous, and waits for all of them.
func (c *Cluster) StartAll(order ...int) {
	c.tb.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(c.Cfgs))
	for k, i := range order {
		wg.Go(func() {
			time.Sleep(time.Duration(k) * 150 * time.Millisecond) // stagger the start order
			errs[i] = c.TryStart(i)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			c.tb.Fatalf("start n%d: %v", i+1, err)
		}
	}
}

// Stop closes node i.
func (c *Cluster) Stop(i int) {
	c.tb.Helper()
	if err := c.Nodes[i].Close(); err != nil {
		c.tb.Logf("close n%d: %v", i+1, err)
	}
	c.Nodes[i] = nil
}

// CloseAll closes every running node, one after another. Closing them
// at once would make each wait out memberlist's leave timeout: a leave is
// broadcast only to peers still alive, and those are leaving too.
func (c *Cluster) CloseAll() {
	for i, n := range c.Nodes {
		if n != nil {
			n.Close()
			c.Nodes[i] = nil
		}
	}
}

// Live returns the running nodes.
func (c *Cluster) Live() []*cluster.Node {
	var out []*cluster.Node
	for _, n := range c.Nodes {
		if n != nil {
			out = append(out, n)
		}
	}
	return out
}

// WaitReplicated waits until every live node hosts every shard with
// replicas members in its group and a leader, and is ready.
func (c *Cluster) WaitReplicated(replicas int) {
	c.tb.Helper()
	testkit.WaitFor(c.tb, 30*time.Second, "full replication", func() bool {
		for _, n := range c.Live() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err := n.Admin().Ready(ctx)
			cancel()
			if err != nil {
				return false
			}
			st := n.Admin().Status()
			if len(st.Shards) != c.Shards {
				return false
			}
			for _, s := range st.Shards {
				if s.Leader == "" || len(s.Replicas) != replicas {
					return false
				}
			}
		}
		return true
	})
}

// WaitPlaced waits until every shard is placed on replicas nodes, each of
// which hosts it and knows its leader, and returns the placement.
func (c *Cluster) WaitPlaced(replicas int) *command.Placement {
	c.tb.Helper()
	var placed *command.Placement
	testkit.WaitFor(c.tb, 30*time.Second, "every shard placed with a leader", func() bool {
		live := c.Live()
		p, err := live[0].Admin().Placement()
		if err != nil || p == nil {
			return false
		}
		byID := map[string]map[string]string{} // node → shard → leader
		for _, n := range live {
			byID[n.ID()] = map[string]string{}
			for _, s := range n.Admin().Status().Shards {
				byID[n.ID()][s.ID] = s.Leader
			}
		}
		for s, reps := range p.Shards {
			if len(reps) != replicas {
				return false
			}
			for _, id := range reps {
				if leader, ok := byID[id][command.ShardID(s).String()]; !ok || leader == "" {
					return false
				}
			}
		}
		placed = p
		return true
	})
	return placed
}

// Leads counts the shards node leads, as it sees them.
func Leads(n *cluster.Node) int {
	led := 0
	for _, s := range n.Admin().Status().Shards {
		if s.Leader == n.ID() {
			led++
		}
	}
	return led
}

// WaitBalanced waits until no live node leads more than its share of the
// shards.
func (c *Cluster) WaitBalanced() {
	c.tb.Helper()
	testkit.WaitFor(c.tb, 30*time.Second, "balanced shard leaders", func() bool {
		live := c.Live()
		share := (c.Shards + len(live) - 1) / len(live)
		for _, n := range live {
			if Leads(n) > share {
				return false
			}
		}
		return true
	})
}

// WaitSpread waits until the replicas are spread evenly and settled: no
// move under way, every live node placed on shards × replicas / nodes
// shards (rounded either way) and hosting exactly those, and every shard
// group's members the placed nodes, all voting. It returns the placement.
func (c *Cluster) WaitSpread(replicas int, within time.Duration) *command.Placement {
	c.tb.Helper()
	var placed *command.Placement
	testkit.Eventually(c.tb, within, func() error {
		live := c.Live()
		p, err := live[0].Admin().Placement()
		if err != nil || p == nil {
			return fmt.Errorf("no placement: %v", err)
		}
		if len(p.Moves) > 0 {
			return fmt.Errorf("a move is under way: %+v", p.Moves)
		}
		lo := c.Shards * replicas / len(live)
		hi := (c.Shards*replicas + len(live) - 1) / len(live)
		for _, n := range live {
			var want []string
			for s, reps := range p.Shards {
				if slices.Contains(reps, n.ID()) {
					want = append(want, command.ShardID(s).String())
				}
			}
			if len(want) < lo || len(want) > hi {
				return fmt.Errorf("%s is placed on %d shards, not %d to %d: %v", n.ID(), len(want), lo, hi, p.Shards)
			}
			var have []string
			for _, g := range n.Admin().Status().Shards {
				have = append(have, g.ID)
				s, err := strconv.Atoi(g.ID)
				if err != nil || s >= len(p.Shards) {
					return fmt.Errorf("%s: a shard %q", n.ID(), g.ID)
				}
				reps := slices.Sorted(slices.Values(p.Shards[s]))
				if g.Leader == "" || fmt.Sprint(slices.Sorted(slices.Values(g.Replicas))) != fmt.Sprint(reps) || len(g.Nonvoters) > 0 {
					return fmt.Errorf("%s: shard %s has members %v (non-voters %v), leader %q; placed on %v", n.ID(), g.ID, g.Replicas, g.Nonvoters, g.Leader, reps)
				}
			}
			if fmt.Sprint(slices.Sorted(slices.Values(have))) != fmt.Sprint(slices.Sorted(slices.Values(want))) {
				return fmt.Errorf("%s hosts %v, placed on %v", n.ID(), have, want)
			}
		}
		placed = p
		return nil
	})
	return placed
}
