package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/linkraft/linkraft/idrange"
	"github.com/linkraft/linkraft/link"
	"github.com/linkraft/linkraft/raftgroup"
)

func openNode(tb testing.TB, cfg Config) *Node {
	tb.Helper()
	cfg.RaftAddr = "127.0.0.1:0"
	cfg.Timing = raftgroup.FastTiming
	if cfg.ClusterKey == nil && !cfg.Insecure {
		cfg.ClusterKey = testKey(tb)
	}
	n, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Open(ctx); err != nil {
		tb.Fatal(err)
	}
	return n
}

func ctx(tb testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	tb.Cleanup(cancel)
	return c
}

// TestGeneratedCodesSkipAliasesAndRestarts: a generated code that an alias
// already holds is skipped; after a restart the rest of the leased range is
// skipped, never reused; the bootstrap settings outlive flags that differ.
func TestGeneratedCodesSkipAliasesAndRestarts(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, Config{DataDir: dir, Shards: 4, IDBlockSize: 64})
	coder, err := idrange.NewCoder(idrange.Mode(n.Settings().CodeMode), n.Settings().CodeKey)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := coder.Code(0)
	if _, err := n.Create(ctx(t), link.CreateRequest{URL: "https://alias.example", Alias: first}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{first: true}
	var lastID uint64
	for i := 0; i < 5; i++ {
		l, err := n.Create(ctx(t), link.CreateRequest{URL: "https://gen.example"})
		if err != nil {
			t.Fatal(err)
		}
		if seen[l.Code] {
			t.Fatalf("code %s issued twice", l.Code)
		}
		seen[l.Code] = true
		id, err := coder.ID(l.Code)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 && id != 1 {
			t.Fatalf("first generated code has id %d; id 0's code is the alias and must be skipped", id)
		}
		lastID = id
	}
	settings := n.Settings()
	nodeID := n.ID()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	// Restart with other flags: the stored settings win.
	n = openNode(t, Config{DataDir: dir, Shards: 16, CodeMode: idrange.ModeSequential, IDBlockSize: 64})
	defer n.Close()
	if n.ID() != nodeID {
		t.Fatalf("node id changed across restart: %s → %s", nodeID, n.ID())
	}
	if s := n.Settings(); s.Shards != 4 || s.CodeMode != settings.CodeMode || string(s.CodeKey) != string(settings.CodeKey) || s.ClusterID != settings.ClusterID {
		t.Fatalf("settings changed across restart: %+v", s)
	}
	l, err := n.Create(ctx(t), link.CreateRequest{URL: "https://after.example"})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := coder.ID(l.Code)
	if id < 64 || id <= lastID {
		t.Fatalf("id %d after restart: the rest of the first range [%d, 64) must be skipped", id, lastID+1)
	}
	// Everything written before is there.
	if got, err := n.Get(ctx(t), first, true); err != nil || got.URL != "https://alias.example" {
		t.Fatalf("alias after restart = %+v, %v", got, err)
	}
}

func TestSequentialModeGivesShortestCodes(t *testing.T) {
	n := openNode(t, Config{DataDir: t.TempDir(), Shards: 2, CodeMode: idrange.ModeSequential})
	defer n.Close()
	for i := 0; i < 3; i++ {
		l, err := n.Create(ctx(t), link.CreateRequest{URL: "https://seq.example"})
		if err != nil {
			t.Fatal(err)
		}
		if want := idrange.Encode(uint64(i)); l.Code != want {
			t.Fatalf("code %d = %q, want %q", i, l.Code, want)
		}
	}
}

func TestNodeIDMustMatchDataDir(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, Config{DataDir: dir, NodeID: "n1", Shards: 1})
	n.Close()
	n2, err := New(Config{DataDir: dir, NodeID: "n2", RaftAddr: "127.0.0.1:0", Shards: 1, Timing: raftgroup.FastTiming, ClusterKey: testKey(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := n2.Open(ctx(t)); err == nil || !strings.Contains(err.Error(), "belongs to node") {
		t.Fatalf("Open with another node id: %v", err)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, cfg := range []Config{
		{},
		{DataDir: "x", BootstrapExpect: 3},
		{DataDir: "x", Shards: 1000},
		{DataDir: "x", ReplicationFactor: 9},
		{DataDir: "x", CodeMode: "bogus"},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}

// TestUpdateAndDeleteErrors: what the log must never hold is refused by
// the leader's check even from a caller that skipped link's validation.
func TestUpdateAndDeleteErrors(t *testing.T) {
	n := openNode(t, Config{DataDir: t.TempDir(), Shards: 2})
	defer n.Close()
	bad := 303
	if _, err := n.Create(ctx(t), link.CreateRequest{URL: "https://x.example", Redirect: bad}); !errors.Is(err, link.ErrInvalidInput) {
		t.Fatalf("create with redirect 303: %v", err)
	}
	if _, err := n.Update(ctx(t), "missing", link.Patch{Redirect: &bad}); !errors.Is(err, link.ErrInvalidInput) {
		t.Fatalf("update with redirect 303: %v", err)
	}
	if err := n.Delete(ctx(t), "missing"); !errors.Is(err, link.ErrNotFound) {
		t.Fatalf("delete missing: %v", err)
	}
}

// TestTransferGateBacksOff: after a failed balancing transfer a shard is
// left alone for transferBackoff, and only that shard.
func TestTransferGateBacksOff(t *testing.T) {
	var g transferGate
	t0 := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	if !g.allow(3, t0) {
		t.Fatal("a shard with no failure is held back")
	}
	g.failed(3, t0)
	if g.allow(3, t0.Add(transferBackoff-time.Millisecond)) {
		t.Fatal("a failed shard is retried within the backoff")
	}
	if !g.allow(4, t0) {
		t.Fatal("another shard is held back by shard 3's failure")
	}
	if !g.allow(3, t0.Add(transferBackoff)) {
		t.Fatal("a failed shard is held back after the backoff")
	}
}
