package shard

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/testkit"
	"github.com/linkraft/linkraft/link"
	"github.com/linkraft/linkraft/raftgroup"
	"github.com/linkraft/linkraft/transport"
)

func mustShard(tb testing.TB, m *transport.Mux, nodeID, dir string, id command.ShardID) *Shard {
	tb.Helper()
	layer, err := m.Layer(transport.KindRaft, uint64(id.Group()))
	if err != nil {
		tb.Fatal(err)
	}
	s, err := Open(Config{ID: id, Group: raftgroup.Config{NodeID: nodeID, Dir: dir, Stream: transport.RaftLayer{Layer: layer}, Timing: raftgroup.FastTiming}})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func TestSingleNodeShardLifecycle(t *testing.T) {
	dir := t.TempDir()
	m := testkit.Mux(t)
	s := mustShard(t, m, "n1", dir, 3)
	if err := s.Group().Bootstrap([]raftgroup.Server{{ID: "n1", Address: m.Addr()}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Group().WaitReady(testkit.Context(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	l, err := apply(testkit.Context(t, 5*time.Second), s, (&command.CreateIfAbsent{Code: "abc", Now: now, Request: link.CreateRequest{URL: "https://example.com"}}).Encode())
	if err != nil {
		t.Fatal(err)
	}
	if l.Code != "abc" || l.Version == 0 {
		t.Fatalf("created %+v", l)
	}
	if _, err := apply(testkit.Context(t, 5*time.Second), s, (&command.CreateIfAbsent{Code: "abc", Now: now, Request: link.CreateRequest{URL: "https://x.example"}}).Encode()); !errors.Is(err, link.ErrAliasTaken) {
		t.Fatalf("duplicate: %v", err)
	}
	// Unknown code is negatively cached, then created: the cache must not
	// keep answering "unknown".
	if _, err := s.Lookup("new", true); !errors.Is(err, link.ErrNotFound) {
		t.Fatal(err)
	}
	if _, err := apply(testkit.Context(t, 5*time.Second), s, (&command.CreateIfAbsent{Code: "new", Now: now, Request: link.CreateRequest{URL: "https://new.example"}}).Encode()); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Lookup("new", true); err != nil || got.URL != "https://new.example" {
		t.Fatalf("lookup after create = %+v, %v", got, err)
	}
	// Update goes through to the cache.
	if _, err := apply(testkit.Context(t, 5*time.Second), s, (&command.Update{Code: "new", Now: now, Patch: link.Patch{URL: new("https://v2.example")}}).Encode()); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Lookup("new", true); got.URL != "https://v2.example" {
		t.Fatalf("lookup after update = %+v", got)
	}
	if got, err := s.LookupConsistent(testkit.Context(t, 5*time.Second), "abc"); err != nil || got.URL != "https://example.com" {
		t.Fatalf("consistent lookup = %+v, %v", got, err)
	}
	if !s.Group().CaughtUp() {
		t.Fatal("single node not caught up")
	}
	applied := s.AppliedIndex()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Restart: no bootstrap, the state is there and new writes go on.
	s = mustShard(t, m, "n1", dir, 3)
	defer s.Close()
	if err := s.Group().Bootstrap([]raftgroup.Server{{ID: "n1", Address: m.Addr()}}); err != nil {
		t.Fatalf("bootstrap on restart must be a no-op: %v", err)
	}
	if s.AppliedIndex() != applied {
		t.Fatalf("applied after reopen %d, want %d", s.AppliedIndex(), applied)
	}
	if err := s.Group().WaitReady(testkit.Context(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Lookup("new", true); err != nil || got.URL != "https://v2.example" {
		t.Fatalf("after restart = %+v, %v", got, err)
	}
	if _, err := apply(testkit.Context(t, 5*time.Second), s, (&command.CreateIfAbsent{Code: "after", Now: now, Request: link.CreateRequest{URL: "https://a.example"}}).Encode()); err != nil {
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
		m := testkit.Mux(t)
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
	var servers []raftgroup.Server
	for i, m := range muxes {
		servers = append(servers, raftgroup.Server{ID: fmt.Sprintf("n%d", i+1), Address: m.Addr()})
	}
	for _, g := range []*Shard{shards[0], others[2]} { // one bootstrapper per group
		if err := g.Group().Bootstrap(servers); err != nil {
			t.Fatal(err)
		}
	}
	for _, set := range [][]*Shard{shards, others} {
		var leader *Shard
		testkit.WaitFor(t, 15*time.Second, "a leader", func() bool {
			for _, s := range set {
				if s.Group().IsLeader() {
					leader = s
				}
			}
			return leader != nil
		})
		if err := leader.Group().WaitReady(testkit.Context(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		l, err := apply(testkit.Context(t, 5*time.Second), leader, (&command.CreateIfAbsent{Code: "rep", Now: time.Now(), Request: link.CreateRequest{URL: "https://r.example"}}).Encode())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range set {
			if s == leader {
				continue
			}
			if _, err := apply(testkit.Context(t, 5*time.Second), s, (&command.Delete{Code: "rep", Now: time.Now()}).Encode()); !errors.Is(err, link.ErrNotLeader) {
				t.Fatalf("follower apply err = %v, want ErrNotLeader", err)
			}
			if _, err := s.LookupConsistent(testkit.Context(t, time.Second), "rep"); !errors.Is(err, link.ErrNotLeader) {
				t.Fatalf("follower consistent read err = %v", err)
			}
			// Followers apply the entry: poll their local state.
			testkit.WaitFor(t, 10*time.Second, "the follower to apply the create", func() bool { return s.AppliedIndex() >= l.Version })
			if got, err := s.Lookup("rep", false); err != nil || got.URL != "https://r.example" {
				t.Fatalf("follower lookup = %+v, %v", got, err)
			}
		}
	}
}

// apply proposes cmd (a link command) through s's group, as the cluster's
// write path does, and returns the link the FSM left or its error.
func apply(ctx context.Context, s *Shard, cmd []byte) (*link.Link, error) {
	resp, _, err := s.Group().Apply(ctx, cmd)
	if err != nil {
		return nil, err
	}
	if rej, ok := resp.(*command.Rejection); ok {
		return nil, rej
	}
	r, ok := resp.(*command.LinkResult)
	if !ok {
		return nil, fmt.Errorf("unexpected apply response %T", resp)
	}
	return r.Link, r.Err
}
