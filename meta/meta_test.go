package meta

import (
	"errors"
	"fmt"
	"slices"
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
	p := PlanPlacement(nil, PlanInput{Nodes: []string{"a", "b", "c", "d"}, Shards: 4, Replicas: 3})
	want := [][]string{{"a", "b", "c"}, {"b", "c", "d"}, {"c", "d", "a"}, {"d", "a", "b"}}
	if p.Version != 1 || fmt.Sprint(p.Shards) != fmt.Sprint(want) {
		t.Fatalf("first placement %+v", p)
	}
	if PlanPlacement(p, PlanInput{Nodes: []string{"a", "b", "c", "d"}, Shards: 4, Replicas: 3, Moves: true}) != nil {
		t.Fatal("a complete placement was changed")
	}
	// Two nodes, three wanted: each shard gets both; a third node then
	// joins every shard.
	p = PlanPlacement(nil, PlanInput{Nodes: []string{"a", "b"}, Shards: 2, Replicas: 3})
	if fmt.Sprint(p.Shards) != "[[a b] [b a]]" {
		t.Fatalf("two-node placement %v", p.Shards)
	}
	p2 := PlanPlacement(p, PlanInput{Nodes: []string{"a", "b", "c"}, Shards: 2, Replicas: 3})
	if p2.Version != 2 || fmt.Sprint(p2.Shards) != "[[a b c] [b a c]]" {
		t.Fatalf("after a join: %+v", p2)
	}
}

// TestPlanPlacementMoves runs the planner as the meta leader and the
// shard leaders would (each move finished as soon as it is planned) and
// checks that it ends balanced, one move at a time, with every shard at
// its replication factor throughout.
func TestPlanPlacementMoves(t *testing.T) {
	nodes := []string{"a", "b", "c"}
	p := PlanPlacement(nil, PlanInput{Nodes: nodes, Shards: 8, Replicas: 3})
	run := func(in PlanInput) (steps int) {
		t.Helper()
		for ; steps < 100; steps++ {
			next := PlanPlacement(p, in)
			if next == nil {
				return steps
			}
			if next.Version != p.Version+1 || len(next.Moves) > 1 {
				t.Fatalf("step %d: %+v after %+v", steps, next, p)
			}
			p = next
			if len(p.Moves) == 1 {
				m := p.Moves[0]
				if len(p.Shards[m.Shard]) != in.Replicas+1 || !slices.Contains(p.Shards[m.Shard], m.From) || p.Shards[m.Shard][in.Replicas] != m.To {
					t.Fatalf("move %+v in %v", m, p.Shards)
				}
				if PlanPlacement(p, in) != nil {
					t.Fatalf("a second move planned beside %+v", m)
				}
				p = FinishMove(p, m.Shard)
			}
			for i, reps := range p.Shards {
				if len(reps) != in.Replicas || len(slices.Compact(slices.Sorted(slices.Values(reps)))) != len(reps) {
					t.Fatalf("shard %d: %v", i, reps)
				}
			}
		}
		t.Fatalf("no end after %d steps: %+v", steps, p)
		return steps
	}
	// Two nodes join: 24 replicas over 5 nodes is 4 or 5 each.
	nodes = append(nodes, "d", "e")
	if steps := run(PlanInput{Nodes: nodes, Shards: 8, Replicas: 3, Moves: true}); steps == 0 {
		t.Fatal("nothing moved to the new nodes")
	}
	for id, n := range loads(p, nodes) {
		if n < 4 || n > 5 {
			t.Fatalf("%s hosts %d replicas: %v", id, n, p.Shards)
		}
	}
	// Without moves allowed (an older member), nothing moves.
	p = PlanPlacement(nil, PlanInput{Nodes: nodes[:3], Shards: 8, Replicas: 3})
	if next := PlanPlacement(p, PlanInput{Nodes: nodes, Shards: 8, Replicas: 3}); next != nil {
		t.Fatalf("moves planned in a cluster that cannot take them: %+v", next)
	}
	// Drain e: its replicas go elsewhere, and none come back.
	run(PlanInput{Nodes: nodes, Shards: 8, Replicas: 3, Moves: true})
	p.Draining = []string{"e"}
	run(PlanInput{Nodes: nodes, Shards: 8, Replicas: 3, Moves: true})
	if Placed(p, "e") {
		t.Fatalf("e still hosts replicas after its drain: %v", p.Shards)
	}
	// A move whose target died is called off; none goes to a dead node.
	alive := map[string]bool{"a": true, "b": true, "c": true, "d": true}
	p = PlanPlacement(nil, PlanInput{Nodes: nodes[:3], Shards: 8, Replicas: 3})
	p = PlanPlacement(p, PlanInput{Nodes: nodes, Shards: 8, Replicas: 3, Moves: true})
	m := p.Moves[0]
	alive[m.To] = false
	next := PlanPlacement(p, PlanInput{Nodes: nodes, Alive: alive, Shards: 8, Replicas: 3, Moves: true})
	if next == nil || len(next.Moves) != 0 || slices.Contains(next.Shards[m.Shard], m.To) {
		t.Fatalf("the move to a dead node: %+v", next)
	}
	p = next
	run(PlanInput{Nodes: nodes, Alive: alive, Shards: 8, Replicas: 3, Moves: true})
	if Placed(p, m.To) {
		t.Fatalf("a replica was moved to the dead %s: %v", m.To, p.Shards)
	}
	// Removing a move's source keeps its target as a replica.
	p = PlanPlacement(nil, PlanInput{Nodes: nodes[:3], Shards: 8, Replicas: 3})
	p = PlanPlacement(p, PlanInput{Nodes: nodes, Shards: 8, Replicas: 3, Moves: true})
	m = p.Moves[0]
	p = Without(p, m.From)
	if len(p.Moves) != 0 || !slices.Contains(p.Shards[m.Shard], m.To) || Placed(p, m.From) || !slices.Contains(p.Removed, m.From) {
		t.Fatalf("after removing %s: %+v", m.From, p)
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
