package raftgroup

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/internal/testkit"
)

// TestRecoverAfterLosingTheMajority: a 3-server group whose two other
// servers are gone for good is rewritten, on the survivor, to the
// survivor alone; opened again it leads, holds every entry it had, and
// takes writes that follow them (no lease given out twice). A survivor
// not in the group, or files a running group holds, are refused.
func TestRecoverAfterLosingTheMajority(t *testing.T) {
	t.Parallel()
	c := newMemCluster(t, 3)
	l := c.groups[c.leader(t)]
	var end uint64
	for range 5 {
		r, _ := lease(t, l, 100)
		end = r.End
	}
	// Every server has the entries before the group stops for good.
	testkit.WaitFor(t, 10*time.Second, "the entries everywhere", func() bool {
		for _, g := range c.groups {
			if g.fsm.AppliedIndex() < l.fsm.AppliedIndex() {
				return false
			}
		}
		return true
	})
	openFSM := func() *fsm.MetaFSM {
		f, err := fsm.NewMetaFSM(fsm.MetaConfig{Path: filepath.Join(c.dirs[0], "state.db")})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}

	// n1 still runs: its Raft log is taken (and its state file: an FSM
	// of its own stands in).
	other, err := fsm.NewMetaFSM(fsm.MetaConfig{Path: filepath.Join(t.TempDir(), "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Recover(Config{Name: "mem", NodeID: "n1", Dir: c.dirs[0], FSM: other}, []string{"n1"}); !errors.Is(err, ErrInUse) {
		t.Fatalf("recover beside the running group: %v", err)
	}
	other.Close()
	for _, g := range c.groups {
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
	}
	f := openFSM()
	if _, err := Recover(Config{Name: "mem", NodeID: "n1", Dir: c.dirs[0], FSM: f}, []string{"n9"}); !errors.Is(err, ErrNoSurvivor) {
		t.Fatalf("recover to a stranger: %v", err)
	}
	kept, err := Recover(Config{Name: "mem", NodeID: "n1", Dir: c.dirs[0], FSM: f}, []string{"n1", "n9"})
	if err != nil || len(kept) != 1 || kept[0].ID != "n1" {
		t.Fatalf("recover: %v, %v", kept, err)
	}
	f.Close()

	f = openFSM()
	_, tr := raft.NewInmemTransport("")
	g, err := open(Config{Name: "mem", NodeID: "n1", Dir: c.dirs[0], FSM: f, Timing: FastTiming}, tr)
	if err != nil {
		f.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	testkit.WaitFor(t, 10*time.Second, "the survivor to lead alone", g.LeaderReady)
	if next, err := f.NextID(); err != nil || next != end {
		t.Fatalf("the survivor's state: next id %d, %v; want %d", next, err, end)
	}
	if r, _ := lease(t, g, 10); r.Start != end {
		t.Fatalf("a lease after recovery starts at %d, want %d", r.Start, end)
	}
	if servers, err := g.Servers(); err != nil || len(servers) != 1 {
		t.Fatalf("servers after recovery: %v, %v", servers, err)
	}
}
