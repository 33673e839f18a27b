package cluster

import (
	"testing"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/raftgroup"
)

// balanceFixture is five nodes and four shards: shards 0 and 1 on a, b,
// c; shard 2 on b, d, e; shard 3 on c, d, e. leads says who leads what.
func balanceFixture(self string, leaders [4]string) balanceView {
	reps := [][]string{{"a", "b", "c"}, {"a", "b", "c"}, {"b", "d", "e"}, {"c", "d", "e"}}
	v := balanceView{self: self, alive: map[string]bool{}, leads: map[string]int{},
		placement: &command.Placement{Shards: reps}}
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		v.alive[id] = true
		v.leads[id] = 0
	}
	for i, l := range leaders {
		v.leads[l]++
		hosts := false
		for _, r := range reps[i] {
			hosts = hosts || r == self
		}
		if !hosts {
			continue
		}
		s := localShard{id: command.ShardID(i), leader: l}
		if l == self {
			for _, r := range reps[i] {
				s.servers = append(s.servers, raftgroup.Server{ID: r, Address: r + ":7000"})
			}
		}
		v.shards = append(v.shards, s)
	}
	return v
}

// TestLeaderBalancingMakesRoom: a leads shards 0 and 1, whose other voters
// b and c lead one each, while d and e lead none. a cannot move (no voter
// of its shards leads two fewer); before, nobody moved and the cluster
// stayed unbalanced for good (a CI run's TestJoinsMoveReplicasUnderWrites).
// Now b and c, within their share but hosting a shard a overloaded node
// leads, hand their own shard to a voter leading none, and a can then move
// one to them.
func TestLeaderBalancingMakesRoom(t *testing.T) {
	stuck := [4]string{"a", "a", "b", "c"}
	if _, _, _, ok := pickTransfer(balanceFixture("a", stuck)); ok {
		t.Fatal("a moved a shard to a voter leading as many as its share")
	}
	for _, self := range []string{"b", "c"} {
		id, to, share, ok := pickTransfer(balanceFixture(self, stuck))
		want := map[string]command.ShardID{"b": 2, "c": 3}[self]
		if !ok || id != want || (to.ID != "d" && to.ID != "e") || share != 1 {
			t.Fatalf("%s: moved %v to %q (share %d, %v); want shard %d to d or e", self, id, to.ID, share, ok, want)
		}
	}
	for _, self := range []string{"d", "e"} {
		if _, _, _, ok := pickTransfer(balanceFixture(self, stuck)); ok {
			t.Fatalf("%s, leading nothing, moved a shard", self)
		}
	}
	// b made room (shard 2 to d): a moves a shard to b.
	id, to, _, ok := pickTransfer(balanceFixture("a", [4]string{"a", "a", "d", "c"}))
	if !ok || (id != 0 && id != 1) || to.ID != "b" {
		t.Fatalf("after b made room: %v to %q (%v)", id, to.ID, ok)
	}
	// Balanced: nobody moves, and nobody makes room.
	for _, self := range []string{"a", "b", "c", "d", "e"} {
		if id, to, _, ok := pickTransfer(balanceFixture(self, [4]string{"a", "b", "d", "c"})); ok {
			t.Fatalf("balanced, yet %s moved shard %d to %s", self, id, to.ID)
		}
	}
	// A shard moved lately is left alone.
	v := balanceFixture("b", stuck)
	v.allow = func(command.ShardID) bool { return false }
	if _, _, _, ok := pickTransfer(v); ok {
		t.Fatal("a shard held after a transfer moved again")
	}
}
