package meta

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/testkit"
	"github.com/linkraft/linkraft/raftgroup"
	"github.com/linkraft/linkraft/transport"
)

func TestHostOf(t *testing.T) {
	for in, want := range map[string]string{
		"https://example.com":              "example.com",
		"https://example.com:8443/x?y#z":   "example.com",
		"http://[2001:db8::1]:80/":         "2001:db8::1",
		"https://a.b.example/path:with:co": "a.b.example",
		"https://x.example?q=1":            "x.example",
	} {
		if got := hostOf(in); got != want {
			t.Errorf("hostOf(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPlanPlacement(t *testing.T) {
	p := PlanPlacement(nil, []string{"a", "b", "c", "d"}, 4, 3)
	want := [][]string{{"a", "b", "c"}, {"b", "c", "d"}, {"c", "d", "a"}, {"d", "a", "b"}}
	if p.Version != 1 || fmt.Sprint(p.Shards) != fmt.Sprint(want) {
		t.Fatalf("first placement %+v", p)
	}
	if PlanPlacement(p, []string{"a", "b", "c", "d"}, 4, 3) != nil {
		t.Fatal("a complete placement was changed")
	}
	// Two nodes, three wanted: each shard gets both; a third node then
	// joins every shard.
	p = PlanPlacement(nil, []string{"a", "b"}, 2, 3)
	if fmt.Sprint(p.Shards) != "[[a b] [b a]]" {
		t.Fatalf("two-node placement %v", p.Shards)
	}
	p2 := PlanPlacement(p, []string{"a", "b", "c"}, 2, 3)
	if p2.Version != 2 || fmt.Sprint(p2.Shards) != "[[a b c] [b a c]]" {
		t.Fatalf("after a join: %+v", p2)
	}
}

// openMeta opens a meta group of one node on a loopback peer port and
// waits for it to lead.
func openMeta(t *testing.T) *Meta {
	t.Helper()
	mux := testkit.Mux(t)
	layer, err := mux.Layer(transport.KindRaft, uint64(command.MetaGroup))
	if err != nil {
		t.Fatal(err)
	}
	m, err := Open(raftgroup.Config{NodeID: "n1", Dir: t.TempDir(), Stream: transport.RaftLayer{Layer: layer}, Timing: raftgroup.FastTiming})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if err := m.Group().Bootstrap([]raftgroup.Server{{ID: "n1", Address: mux.Addr()}}); err != nil {
		t.Fatal(err)
	}
	if err := m.Group().WaitReady(testkit.Context(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestAdmitRecordsEachLevel: the registry records the level each node was
// last admitted at, lower ones too (a rollback to a version that records
// levels), keeps the first registration's time, and Behind names the
// first node below a level: one registered without a level is below
// every level, and a node removed from the placement is not counted.
func TestAdmitRecordsEachLevel(t *testing.T) {
	m := openMeta(t)
	ctx := testkit.Context(t, 10*time.Second)
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	apply := func(entry []byte) any {
		t.Helper()
		out, _, err := m.Group().Apply(ctx, entry)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	admit := func(node string, level uint32, at time.Time) {
		t.Helper()
		r := apply((&command.AdmitNode{Member: command.RegisterNode{Node: node, Incarnation: "inc-" + node, At: at, Level: level}}).Encode())
		if err := r.(*command.RegisterResult).Err; err != nil {
			t.Fatal(err)
		}
	}
	admit("n1", 7, t0)
	admit("n2", 7, t0)
	if id, _, err := m.Behind(7); err != nil || id != "" {
		t.Fatalf("Behind(7) with every node at 7: %q %v", id, err)
	}
	admit("n2", 6, t0.Add(time.Hour)) // rolled back to a version of level 6
	if id, at, err := m.Behind(7); err != nil || id != "n2" || at != 6 {
		t.Fatalf("Behind(7) after n2's rollback: %q at %d, %v", id, at, err)
	}
	if r, ok, err := m.Member("n2"); err != nil || !ok || r.Level != 6 || !r.RegisteredAt.Equal(t0) {
		t.Fatalf("n2's record %+v %v %v: want level 6, registered at the first time", r, ok, err)
	}
	apply((&command.RegisterNode{Node: "n3", Incarnation: "inc-n3", At: t0}).Encode())
	if id, at, err := m.Behind(1); err != nil || id != "n3" || at != 0 {
		t.Fatalf("Behind(1) with n3 registered without a level: %q at %d, %v", id, at, err)
	}
	apply((&command.SetPlacement{Placement: command.Placement{Version: 1, Shards: [][]string{{"n1"}}, Removed: []string{"n3"}}}).Encode())
	if id, _, err := m.Behind(6); err != nil || id != "" {
		t.Fatalf("Behind(6) with n3 removed: %q %v", id, err)
	}
	// Another incarnation under a known ID is refused, its record kept.
	r := apply((&command.AdmitNode{Member: command.RegisterNode{Node: "n1", Incarnation: "wiped", At: t0, Level: 7}}).Encode())
	if rr := r.(*command.RegisterResult); !errors.Is(rr.Err, command.ErrIncarnation) || rr.Incarnation != "inc-n1" {
		t.Fatalf("a new incarnation of n1: %+v", rr)
	}
}
