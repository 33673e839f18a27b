package jepsen

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/linkraft/linkraft/jepsen/checker"
)

// TestNemesisFirst: -nemesis-first takes faults of the run's list only, and
// the schedule injects them first, in order; "crash" names both crash
// faults, and "all" (the binary as shipped) holds neither them nor
// power-loss.
func TestNemesisFirst(t *testing.T) {
	faults, err := parseNemesis("kill,power,crash")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(faults, "crash-point") || !slices.Contains(faults, "crash-install") || !slices.Contains(faults, "power-loss") {
		t.Fatalf("kill,power,crash gave %v", faults)
	}
	all, _ := parseNemesis("all")
	if slices.Contains(all, "crash-point") || slices.Contains(all, "power-loss") {
		t.Fatalf("all gave %v", all)
	}
	n := &nemesis{rng: rand.New(rand.NewPCG(1, 2)), db: &db{nodes: make([]*dbNode, 3)}}
	n.buildFaults(faults)
	if err := n.putFirst("power-loss, crash-point,crash-point"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range n.first {
		got = append(got, f.name)
	}
	if strings.Join(got, ",") != "power-loss,crash-point,crash-point" {
		t.Fatalf("queued %v", got)
	}
	if err := (&nemesis{}).putFirst("partition-one"); err == nil {
		t.Fatal("a fault outside the run's list was queued")
	}
}

// TestNemesisKills: the counter checker is given the nemesis's SIGKILLs as
// the node runs recorded them, not other ends.
func TestNemesisKills(t *testing.T) {
	runs := []checker.NodeRun{
		{Node: "n1", Exited: true, Signal: "killed", Cause: checker.CauseNemesis, Ended: 5},
		{Node: "n1", Exited: true, Signal: "killed", Cause: checker.CauseNemesis, Ended: 9},
		{Node: "n2", Exited: true, Signal: "terminated", Cause: checker.CauseNemesis, Ended: 7},
		{Node: "n3", Exited: true, Signal: "killed", Ended: 8}, // died on its own
		{Node: "n4", Exited: false},
	}
	got := nemesisKills(runs)
	if len(got) != 1 || !slices.Equal(got["n1"], []int64{5, 9}) {
		t.Fatalf("kills %v", got)
	}
}
