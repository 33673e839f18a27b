package shard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/link"
	"github.com/linkraft/linkraft/transport"
)

// TestRingPinsPlacement pins code → shard answers of buraksezer/consistent
// v1.1.0 with xxhash64, 271 partitions, load 1.25 and 8 shards. If a library
// upgrade moves keys, this fails before any stored link becomes unreachable.
func TestRingPinsPlacement(t *testing.T) {
	r, err := NewRing(RingConfig{Shards: 8})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"abc": 4, "0000001": 4, "hello-world": 4, "Zz9_x": 0, "aaaaaaa": 5, "github": 7, "x": 4}
	for code, shard := range want {
		if got := r.Locate(code); got != shard {
			t.Errorf("Locate(%q) = %d, pinned %d: placement changed", code, got, shard)
		}
	}
	counts := make([]int, 8)
	for p := range r.owner {
		counts[r.owner[p]]++
	}
	max := 0
	for _, n := range counts {
		if n > max {
			max = n
		}
	}
	// consistent's bound: ceil(271/8 × 1.25) = 43 partitions at most.
	if max > 43 {
		t.Fatalf("a shard owns %d partitions: %v", max, counts)
	}
}

func TestRingRejectsBadConfig(t *testing.T) {
	for _, cfg := range []RingConfig{{Shards: 0}, {Shards: 8, PartitionCount: 4}, {Shards: 8, Load: 0.5}, {Shards: 5000}, {Shards: 8, Hasher: "md5"}, {Shards: 8, VNodes: -1}} {
		if _, err := NewRing(cfg); err == nil {
			t.Errorf("NewRing(%+v) accepted", cfg)
		}
	}
}

func mustMux(tb testing.TB) *transport.Mux {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	m, err := transport.New(transport.Config{Listener: ln})
	if err != nil {
		tb.Fatal(err)
	}
	go m.Serve(context.Background())
	tb.Cleanup(func() { m.Close() })
	return m
}

func mustShard(tb testing.TB, m *transport.Mux, nodeID, dir string, id int) *Shard {
	tb.Helper()
	layer, err := m.Layer(transport.KindRaft, uint64(id)+1)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := Open(Config{ID: id, NodeID: nodeID, Dir: dir, Stream: transport.RaftLayer{Layer: layer}, Timing: FastTiming})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func ctxT(tb testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

func TestSingleNodeShardLifecycle(t *testing.T) {
	dir := t.TempDir()
	m := mustMux(t)
	s := mustShard(t, m, "n1", dir, 3)
	if err := s.Group().Bootstrap([]Server{{ID: "n1", Address: m.Addr()}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Group().WaitReady(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	l, err := s.Apply(ctxT(t, 5*time.Second), (&fsm.CreateIfAbsent{Code: "abc", URL: "https://example.com", Now: now}).Encode())
	if err != nil {
		t.Fatal(err)
	}
	if l.Code != "abc" || l.Version == 0 {
		t.Fatalf("created %+v", l)
	}
	if _, err := s.Apply(ctxT(t, 5*time.Second), (&fsm.CreateIfAbsent{Code: "abc", URL: "https://x.example", Now: now}).Encode()); !errors.Is(err, link.ErrAliasTaken) {
		t.Fatalf("duplicate: %v", err)
	}
	// Unknown code is negatively cached, then created: the cache must not
	// keep answering "unknown".
	if _, err := s.Lookup("new", true); !errors.Is(err, link.ErrNotFound) {
		t.Fatal(err)
	}
	if _, err := s.Apply(ctxT(t, 5*time.Second), (&fsm.CreateIfAbsent{Code: "new", URL: "https://new.example", Now: now}).Encode()); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Lookup("new", true); err != nil || got.URL != "https://new.example" {
		t.Fatalf("lookup after create = %+v, %v", got, err)
	}
	// Update goes through to the cache.
	if _, err := s.Apply(ctxT(t, 5*time.Second), (&fsm.Update{Code: "new", Now: now, Set: fsm.SetURL, URL: "https://v2.example"}).Encode()); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Lookup("new", true); got.URL != "https://v2.example" {
		t.Fatalf("lookup after update = %+v", got)
	}
	if got, err := s.LookupConsistent(ctxT(t, 5*time.Second), "abc"); err != nil || got.URL != "https://example.com" {
		t.Fatalf("consistent lookup = %+v, %v", got, err)
	}
	if !s.Group().CaughtUp() {
		t.Fatal("single node not caught up")
	}
	applied := s.FSM().AppliedIndex()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Restart: no bootstrap, the state is there and new writes go on.
	s = mustShard(t, m, "n1", dir, 3)
	defer s.Close()
	if err := s.Group().Bootstrap([]Server{{ID: "n1", Address: m.Addr()}}); err != nil {
		t.Fatalf("bootstrap on restart must be a no-op: %v", err)
	}
	if s.FSM().AppliedIndex() != applied {
		t.Fatalf("applied after reopen %d, want %d", s.FSM().AppliedIndex(), applied)
	}
	if err := s.Group().WaitReady(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Lookup("new", true); err != nil || got.URL != "https://v2.example" {
		t.Fatalf("after restart = %+v, %v", got, err)
	}
	if _, err := s.Apply(ctxT(t, 5*time.Second), (&fsm.CreateIfAbsent{Code: "after", URL: "https://a.example", Now: now}).Encode()); err != nil {
		t.Fatal(err)
	}
}

// TestThreeReplicasOverSharedPorts runs one shard group on three nodes, each
// with its own mux that also carries a second group, and checks that writes
// replicate and a follower refuses consistent reads.
func TestThreeReplicasOverSharedPorts(t *testing.T) {
	var muxes []*transport.Mux
	var shards, others []*Shard
	for i := 0; i < 3; i++ {
		m := mustMux(t)
		muxes = append(muxes, m)
		id := fmt.Sprintf("n%d", i+1)
		shards = append(shards, mustShard(t, m, id, t.TempDir(), 0))
		others = append(others, mustShard(t, m, id, t.TempDir(), 1))
	}
	defer func() {
		for i := range shards {
			shards[i].Close()
			others[i].Close()
		}
	}()
	var servers []Server
	for i, m := range muxes {
		servers = append(servers, Server{ID: fmt.Sprintf("n%d", i+1), Address: m.Addr()})
	}
	for _, g := range []*Shard{shards[0], others[2]} { // one bootstrapper per group
		if err := g.Group().Bootstrap(servers); err != nil {
			t.Fatal(err)
		}
	}
	for _, set := range [][]*Shard{shards, others} {
		var leader *Shard
		deadline := time.Now().Add(15 * time.Second)
		for leader == nil {
			for _, s := range set {
				if s.Group().IsLeader() {
					leader = s
				}
			}
			if time.Now().After(deadline) {
				t.Fatal("no leader elected")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := leader.Group().WaitReady(ctxT(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		l, err := leader.Apply(ctxT(t, 5*time.Second), (&fsm.CreateIfAbsent{Code: "rep", URL: "https://r.example", Now: time.Now()}).Encode())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range set {
			if s == leader {
				continue
			}
			if _, err := s.Apply(ctxT(t, 5*time.Second), (&fsm.Delete{Code: "rep", Now: time.Now()}).Encode()); !errors.Is(err, link.ErrNotLeader) {
				t.Fatalf("follower apply err = %v, want ErrNotLeader", err)
			}
			if _, err := s.LookupConsistent(ctxT(t, time.Second), "rep"); !errors.Is(err, link.ErrNotLeader) {
				t.Fatalf("follower consistent read err = %v", err)
			}
			// Followers apply the entry: poll their local state.
			deadline := time.Now().Add(10 * time.Second)
			for s.FSM().AppliedIndex() < l.Version {
				if time.Now().After(deadline) {
					t.Fatal("follower never applied the create")
				}
				time.Sleep(5 * time.Millisecond)
			}
			if got, err := s.Lookup("rep", false); err != nil || got.URL != "https://r.example" {
				t.Fatalf("follower lookup = %+v, %v", got, err)
			}
		}
	}
}

// TestConfirmLeaderNeedsAQuorum: a leader confirms itself within its lease
// or by a quorum round; cut off from its followers it stops confirming once
// the lease has run out, even while raft still calls it leader, so it never
// answers "no such link" for a group another node may lead by now.
func TestConfirmLeaderNeedsAQuorum(t *testing.T) {
	var muxes []*transport.Mux
	var shards []*Shard
	var servers []Server
	for i := 0; i < 3; i++ {
		m := mustMux(t)
		muxes = append(muxes, m)
		shards = append(shards, mustShard(t, m, fmt.Sprintf("n%d", i+1), t.TempDir(), 0))
		servers = append(servers, Server{ID: fmt.Sprintf("n%d", i+1), Address: m.Addr()})
	}
	defer func() {
		for _, s := range shards {
			s.Close()
		}
	}()
	if err := shards[0].Group().Bootstrap(servers); err != nil {
		t.Fatal(err)
	}
	var leader *Shard
	electing := ctxT(t, 15*time.Second)
	for leader == nil {
		for _, s := range shards {
			if s.Group().LeaderReady() {
				leader = s
			}
		}
		select {
		case <-electing.Done():
			t.Fatal("no ready leader")
		case <-time.After(10 * time.Millisecond):
		}
	}
	g := leader.Group()
	if err := g.ConfirmLeader(ctxT(t, 5*time.Second)); err != nil {
		t.Fatalf("leader cannot confirm: %v", err)
	}
	if !g.leaseValid() {
		t.Fatal("no lease right after a confirmation")
	}
	for _, s := range shards {
		if s != leader {
			if err := s.Group().ConfirmLeader(ctxT(t, time.Second)); !errors.Is(err, link.ErrNotLeader) {
				t.Fatalf("follower confirmed: %v", err)
			}
		}
	}
	// A transfer this node begins ends the lease at once.
	g.resetLease()
	if g.leaseValid() {
		t.Fatal("lease survived a reset")
	}
	if err := g.ConfirmLeader(ctxT(t, 5*time.Second)); err != nil || !g.leaseValid() {
		t.Fatalf("quorum round after reset: %v, lease %v", err, g.leaseValid())
	}
	// Cut the followers off: once the lease is over, no confirmation.
	for _, s := range shards {
		if s != leader {
			s.Close()
		}
	}
	expiring := ctxT(t, 5*time.Second)
	for g.leaseValid() {
		select {
		case <-expiring.Done():
			t.Fatal("lease never ran out")
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := g.ConfirmLeader(ctxT(t, 3*time.Second)); err == nil {
		t.Fatal("a leader without a quorum confirmed itself after its lease")
	}
}
