package raftgroup

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/internal/testkit"
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
