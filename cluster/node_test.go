package cluster_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/idrange"
	"github.com/linkraft/linkraft/internal/testcluster"
	"github.com/linkraft/linkraft/link"
	"github.com/linkraft/linkraft/raftgroup"
)

// TestGeneratedCodesSkipAliasesAndRestarts: a generated code that an alias
// already holds is skipped; after a restart the rest of the leased range is
// skipped, never reused; the bootstrap settings outlive flags that differ.
func TestGeneratedCodesSkipAliasesAndRestarts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n := testcluster.Node(t, cluster.Config{DataDir: dir, Shards: 4, IDBlockSize: 64})
	coder, err := idrange.NewCoder(idrange.Mode(n.Settings().CodeMode), n.Settings().CodeKey)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := coder.Code(0)
	if _, err := n.Links().Create(ctx(t), link.CreateRequest{URL: "https://alias.example", Alias: first}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{first: true}
	var lastID uint64
	for i := 0; i < 5; i++ {
		l, err := n.Links().Create(ctx(t), link.CreateRequest{URL: "https://gen.example"})
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
	n = testcluster.Node(t, cluster.Config{DataDir: dir, Shards: 16, CodeMode: idrange.ModeSequential, IDBlockSize: 64})
	defer n.Close()
	if n.ID() != nodeID {
		t.Fatalf("node id changed across restart: %s → %s", nodeID, n.ID())
	}
	if s := n.Settings(); s.Shards != 4 || s.CodeMode != settings.CodeMode || string(s.CodeKey) != string(settings.CodeKey) || s.ClusterID != settings.ClusterID {
		t.Fatalf("settings changed across restart: %+v", s)
	}
	l, err := n.Links().Create(ctx(t), link.CreateRequest{URL: "https://after.example"})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := coder.ID(l.Code)
	if id < 64 || id <= lastID {
		t.Fatalf("id %d after restart: the rest of the first range [%d, 64) must be skipped", id, lastID+1)
	}
	// Everything written before is there.
	if got, err := n.Links().Get(ctx(t), first, true); err != nil || got.URL != "https://alias.example" {
		t.Fatalf("alias after restart = %+v, %v", got, err)
	}
}

func TestSequentialModeGivesShortestCodes(t *testing.T) {
	t.Parallel()
	n := testcluster.Node(t, cluster.Config{DataDir: t.TempDir(), Shards: 2, CodeMode: idrange.ModeSequential})
	defer n.Close()
	for i := 0; i < 3; i++ {
		l, err := n.Links().Create(ctx(t), link.CreateRequest{URL: "https://seq.example"})
		if err != nil {
			t.Fatal(err)
		}
		if want := idrange.Encode(uint64(i)); l.Code != want {
			t.Fatalf("code %d = %q, want %q", i, l.Code, want)
		}
	}
}

func TestNodeIDMustMatchDataDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n := testcluster.Node(t, cluster.Config{DataDir: dir, NodeID: "n1", Shards: 1})
	n.Close()
	n2, err := cluster.New(cluster.Config{DataDir: dir, NodeID: "n2", RaftAddr: "127.0.0.1:0", Shards: 1, Timing: raftgroup.FastTiming, ClusterKey: testcluster.Key(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := n2.Open(ctx(t)); err == nil || !strings.Contains(err.Error(), "belongs to node") {
		t.Fatalf("Open with another node id: %v", err)
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	for _, cfg := range []cluster.Config{
		{},
		{DataDir: "x", BootstrapExpect: 3},
		{DataDir: "x", Shards: 1000},
		{DataDir: "x", ReplicationFactor: 9},
		{DataDir: "x", CodeMode: "bogus"},
		{DataDir: "x", Insecure: true, FeatureLevel: cluster.FeatureLevel + 1},
		{DataDir: "x", Insecure: true, FeatureLevel: -1},
	} {
		if _, err := cluster.New(cfg); err == nil {
			t.Errorf("cluster.New(%+v) accepted", cfg)
		}
	}
}

// TestUpdateAndDeleteErrors: what the log must never hold is refused by
// the leader's check even from a caller that skipped link's validation.
func TestUpdateAndDeleteErrors(t *testing.T) {
	t.Parallel()
	n := testcluster.Node(t, cluster.Config{DataDir: t.TempDir(), Shards: 2})
	defer n.Close()
	bad := 303
	if _, err := n.Links().Create(ctx(t), link.CreateRequest{URL: "https://x.example", Redirect: bad}); !errors.Is(err, link.ErrInvalidInput) {
		t.Fatalf("create with redirect 303: %v", err)
	}
	if _, err := n.Links().Update(ctx(t), "missing", link.Patch{Redirect: &bad}); !errors.Is(err, link.ErrInvalidInput) {
		t.Fatalf("update with redirect 303: %v", err)
	}
	if err := n.Links().Delete(ctx(t), "missing"); !errors.Is(err, link.ErrNotFound) {
		t.Fatalf("delete missing: %v", err)
	}
}

// TestDataDirFromANewerVersionIsRefused: a node records the feature level
// it runs at in its data dir; a data dir last run at a level above this
// version's is refused with the way back, and a run with -feature-level
// lowered (before a rollback) records the lower level.
func TestDataDirFromANewerVersionIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := testcluster.Key(t)
	level := filepath.Join(dir, "feature-level")
	n := testcluster.Node(t, cluster.Config{DataDir: dir, NodeID: "n1", Shards: 1, ClusterKey: key})
	if b, err := os.ReadFile(level); err != nil || strings.TrimSpace(string(b)) != fmt.Sprint(cluster.FeatureLevel) {
		t.Fatalf("recorded level %q, %v", b, err)
	}
	n.Close()
	if err := os.WriteFile(level, []byte(fmt.Sprint(cluster.FeatureLevel+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	newer, err := cluster.New(cluster.Config{DataDir: dir, NodeID: "n1", RaftAddr: "127.0.0.1:0", Shards: 1, Timing: raftgroup.FastTiming, ClusterKey: key})
	if err != nil {
		t.Fatal(err)
	}
	if err := newer.Open(ctx(t)); !errors.Is(err, cluster.ErrNewerData) || !strings.Contains(err.Error(), fmt.Sprintf("-feature-level %d", cluster.FeatureLevel)) {
		t.Fatalf("a data dir of a newer version: %v", err)
	}
	if err := os.WriteFile(level, []byte(fmt.Sprint(cluster.FeatureLevel)), 0o600); err != nil {
		t.Fatal(err)
	}
	n = testcluster.Node(t, cluster.Config{DataDir: dir, NodeID: "n1", Shards: 1, ClusterKey: key, FeatureLevel: cluster.FeatureLevel - 1})
	n.Close()
	if b, err := os.ReadFile(level); err != nil || strings.TrimSpace(string(b)) != fmt.Sprint(cluster.FeatureLevel-1) {
		t.Fatalf("recorded level after a lowered run %q, %v", b, err)
	}
}

// TestRaftLogLayoutFollowsTheLevel: below the shared log's feature level a
// node keeps a raft.db per group; run at this version's level it moves
// every group's log into the node's shared file (and no raft.db is left),
// and run below it again (a rollback's first step) it moves them back out
// (and the shared file goes). Every link written under either layout
// survives both moves, and the node keeps its place in its groups.
func TestRaftLogLayoutFollowsTheLevel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := testcluster.Key(t)
	shared := filepath.Join(dir, "raft-log")
	own := func() []string {
		files, err := filepath.Glob(filepath.Join(dir, "*", "raft.db"))
		if err != nil {
			t.Fatal(err)
		}
		more, _ := filepath.Glob(filepath.Join(dir, "shards", "*", "raft.db"))
		return append(files, more...)
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	var codes []string
	run := func(level int) {
		t.Helper()
		n := testcluster.Node(t, cluster.Config{DataDir: dir, NodeID: "n1", Shards: 3, ClusterKey: key, FeatureLevel: level})
		defer n.Close()
		for _, c := range codes {
			if got, err := n.Links().Get(ctx(t), c, true); err != nil || got.Code != c {
				t.Fatalf("level %d: link %s written before: %+v, %v", level, c, got, err)
			}
		}
		for i := range 5 {
			l, err := n.Links().Create(ctx(t), link.CreateRequest{URL: fmt.Sprintf("https://level%d.example/%d", level, i)})
			if err != nil {
				t.Fatalf("level %d: %v", level, err)
			}
			codes = append(codes, l.Code)
		}
	}
	run(cluster.FeatureLevel - 1)
	if got := own(); len(got) != 4 || exists(shared) {
		t.Fatalf("below the shared log's level: own logs %v, shared file there: %v", got, exists(shared))
	}
	run(0)
	if got := own(); len(got) != 0 || !exists(shared) {
		t.Fatalf("at this version's level: own logs %v, shared file there: %v", got, exists(shared))
	}
	run(cluster.FeatureLevel - 1)
	if got := own(); len(got) != 4 || exists(shared) {
		t.Fatalf("back below the shared log's level: own logs %v, shared file there: %v", got, exists(shared))
	}
	run(0)
}
