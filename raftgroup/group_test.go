package raftgroup

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/internal/testkit"
	"github.com/linkraft/linkraft/link"
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

// TestConfirmLeaderNeedsAQuorum: a leader confirms itself within its lease
// or by a quorum round; cut off from its followers it stops confirming once
// the lease has run out, even while raft still calls it leader, so it never
// answers "no such link" for a group another node may lead by now.
func TestConfirmLeaderNeedsAQuorum(t *testing.T) {
	var muxes []*transport.Mux
	var groups []*Group
	var servers []Server
	for i := 0; i < 3; i++ {
		m := testkit.Mux(t)
		muxes = append(muxes, m)
		groups = append(groups, mustGroup(t, m, fmt.Sprintf("n%d", i+1)))
		servers = append(servers, Server{ID: fmt.Sprintf("n%d", i+1), Address: m.Addr()})
	}
	defer func() {
		for _, s := range groups {
			s.Close()
		}
	}()
	if err := groups[0].Bootstrap(servers); err != nil {
		t.Fatal(err)
	}
	var leader *Group
	testkit.WaitFor(t, 15*time.Second, "a ready leader", func() bool {
		for _, s := range groups {
			if s.LeaderReady() {
				leader = s
			}
		}
		return leader != nil
	})
	g := leader
	if err := g.ConfirmLeader(testkit.Context(t, 5*time.Second)); err != nil {
		t.Fatalf("leader cannot confirm: %v", err)
	}
	if !g.leaseValid() {
		t.Fatal("no lease right after a confirmation")
	}
	for _, s := range groups {
		if s != leader {
			if err := s.ConfirmLeader(testkit.Context(t, time.Second)); !errors.Is(err, link.ErrNotLeader) {
				t.Fatalf("follower confirmed: %v", err)
			}
		}
	}
	// A transfer this node begins ends the lease at once.
	g.resetLease()
	if g.leaseValid() {
		t.Fatal("lease survived a reset")
	}
	if err := g.ConfirmLeader(testkit.Context(t, 5*time.Second)); err != nil || !g.leaseValid() {
		t.Fatalf("quorum round after reset: %v, lease %v", err, g.leaseValid())
	}
	// Cut the followers off: once the lease is over, no confirmation.
	for _, s := range groups {
		if s != leader {
			s.Close()
		}
	}
	testkit.WaitFor(t, 5*time.Second, "the lease to run out", func() bool { return !g.leaseValid() })
	if err := g.ConfirmLeader(testkit.Context(t, 3*time.Second)); err == nil {
		t.Fatal("a leader without a quorum confirmed itself after its lease")
	}
}
