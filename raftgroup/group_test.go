package raftgroup

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/internal/testkit"
	"github.com/linkraft/linkraft/link"
	"github.com/linkraft/linkraft/raftgroup/nodelog"
	"github.com/linkraft/linkraft/transport"
)

// mustGroup opens a group over the meta FSM (any StateMachine would do)
// on the mux's first Raft layer.
func mustGroup(tb testing.TB, m *transport.Mux, nodeID string) *Group {
	tb.Helper()
	dir := tb.TempDir()
	f, err := fsm.NewMetaFSM(fsm.MetaConfig{Path: filepath.Join(dir, "state.db")})
	if err != nil {
		tb.Fatal(err)
	}
	layer, err := m.Layer(transport.KindRaft, 1)
	if err != nil {
		tb.Fatal(err)
	}
	g, err := Open(Config{Name: "test", NodeID: nodeID, Dir: dir, FSM: f, Stream: transport.RaftLayer{Layer: layer}, Timing: FastTiming})
	if err != nil {
		f.Close()
		tb.Fatal(err)
	}
	tb.Cleanup(func() { g.Close() })
	return g
}

// TestSoleVoterStandsAtOnce: a group whose only voter is this node elects
// itself when it is bootstrapped and when it opens again, without waiting
// out its heartbeat timeout (an hour here: the test would time out).
func TestSoleVoterStandsAtOnce(t *testing.T) {
	dir := t.TempDir()
	slow := Timing{HeartbeatTimeout: time.Hour, ElectionTimeout: time.Hour, LeaderLeaseTimeout: 100 * time.Millisecond, CommitTimeout: 5 * time.Millisecond}
	openOne := func() *Group {
		f, err := fsm.NewMetaFSM(fsm.MetaConfig{Path: filepath.Join(dir, "state.db")})
		if err != nil {
			t.Fatal(err)
		}
		addr, tr := raft.NewInmemTransport("sole")
		g, err := open(Config{Name: "sole", NodeID: "n1", Dir: dir, FSM: f, Timing: slow}, tr)
		if err != nil {
			f.Close()
			t.Fatal(err)
		}
		if err := g.Bootstrap([]Server{{ID: "n1", Address: string(addr)}}); err != nil {
			g.Close()
			t.Fatal(err)
		}
		return g
	}
	for _, when := range []string{"bootstrapped", "opened again"} {
		g := openOne()
		testkit.WaitFor(t, 20*time.Second, "the sole voter to lead when "+when, g.LeaderReady)
		// The check at open runs on its own goroutine: wait for it before
		// reading the timeout it puts back.
		testkit.WaitFor(t, 5*time.Second, "the heartbeat timeout put back", func() bool {
			return g.raft.ReloadableConfig().HeartbeatTimeout == slow.HeartbeatTimeout
		})
		if _, _, err := g.Apply(testkit.Context(t, 5*time.Second), (&command.LeaseRange{Node: "n1", N: 1}).Encode()); err != nil {
			t.Fatalf("apply after it was %s: %v", when, err)
		}
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSoleVoter: only a configuration whose one voter is this node
// stands early; nonvoters do not count.
func TestSoleVoter(t *testing.T) {
	srv := func(id string, s raft.ServerSuffrage) raft.Server {
		return raft.Server{ID: raft.ServerID(id), Suffrage: s}
	}
	for _, c := range []struct {
		servers []raft.Server
		want    bool
	}{
		{nil, false},
		{[]raft.Server{srv("n1", raft.Voter)}, true},
		{[]raft.Server{srv("n2", raft.Voter)}, false},
		{[]raft.Server{srv("n1", raft.Voter), srv("n2", raft.Voter)}, false},
		{[]raft.Server{srv("n1", raft.Voter), srv("n2", raft.Nonvoter)}, true},
		{[]raft.Server{srv("n1", raft.Nonvoter), srv("n2", raft.Voter)}, false},
	} {
		if got := soleVoter(raft.Configuration{Servers: c.servers}, "n1"); got != c.want {
			t.Errorf("soleVoter(%v, n1) = %v, want %v", c.servers, got, c.want)
		}
	}
}

// TestTrailingBytesBoundTheLog: a group in the node's shared log whose
// entries are large keeps about TrailingBytes of them behind a snapshot.
// 300 creates of 4 KB URLs are far below the snapshot threshold (2,048
// entries), and raft alone keeps all of them (it keeps TrailingLogs,
// 2,048, behind any snapshot); bounded to 256 KiB, the log shrinks to
// what that holds, and keeps at least minTrailing entries.
func TestTrailingBytesBoundTheLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logs, err := nodelog.Open(nodelog.Config{Path: filepath.Join(dir, "raft-log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logs.Close() })
	f, err := fsm.NewShardFSM(fsm.ShardConfig{Path: filepath.Join(dir, "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	const bound = 256 << 10
	view := logs.Log("shard-0")
	addr, tr := raft.NewInmemTransport("n1")
	g, err := open(Config{Name: "shard-0", NodeID: "n1", Dir: dir, FSM: f, Log: view, Timing: FastTiming,
		Snapshots: SnapshotPolicy{Interval: 20 * time.Millisecond, TrailingBytes: bound}}, tr)
	if err != nil {
		f.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	if err := g.Bootstrap([]Server{{ID: "n1", Address: string(addr)}}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the group to lead", g.LeaderReady)
	long := strings.Repeat("x", 4000)
	for i := range 300 {
		c := &command.CreateIfAbsent{Code: fmt.Sprintf("c%04d", i), Now: time.Now(),
			Request: link.CreateRequest{URL: fmt.Sprintf("https://e.example/%d/%s", i, long)}}
		if _, _, err := g.Apply(testkit.Context(t, 5*time.Second), c.Encode()); err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	var n int
	var size int64
	testkit.WaitFor(t, 10*time.Second, "the log bounded to twice the trailing bytes", func() bool {
		n, size, err = view.Size()
		return err == nil && size <= 2*bound
	})
	if n < minTrailing {
		t.Fatalf("%d entries (%d bytes) kept, want at least %d", n, size, minTrailing)
	}
	if _, _, err := g.Apply(testkit.Context(t, 5*time.Second), (&command.CreateIfAbsent{Code: "after", Now: time.Now(),
		Request: link.CreateRequest{URL: "https://e.example/after"}}).Encode()); err != nil {
		t.Fatalf("a create after the compaction: %v", err)
	}
}

// TestTrailingFor: the entries kept fit the budget at their average size,
// within minTrailing and the configured most.
func TestTrailingFor(t *testing.T) {
	for _, c := range []struct {
		entries    int
		size       int64
		budget     int64
		most, want uint64
	}{
		{entries: 4000, size: 4000 * 200, budget: 8 << 20, most: 2048, want: 2048},  // small entries: raft's count
		{entries: 1250, size: 1250 * 40000, budget: 8 << 20, most: 2048, want: 209}, // a bulk import's
		{entries: 10, size: 10 * (4 << 20), budget: 8 << 20, most: 2048, want: minTrailing},
		{entries: 10, size: 10 * (4 << 20), budget: 8 << 20, most: 8, want: 8},
		{entries: 1, size: 0, budget: 8 << 20, most: 2048, want: 2048},
	} {
		if got := trailingFor(c.entries, c.size, c.budget, c.most); got != c.want {
			t.Errorf("trailingFor(%d, %d, %d, %d) = %d, want %d", c.entries, c.size, c.budget, c.most, got, c.want)
		}
	}
}
