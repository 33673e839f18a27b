package meta

import (
	"slices"

	"github.com/linkraft/linkraft/command"
)

// PlanInput is what a placement is planned from.
type PlanInput struct {
	// Nodes are the meta group's members that were not removed, sorted.
	Nodes []string
	// Alive says which nodes gossip sees alive; nil means all of them.
	// Replicas are placed and moved only to live nodes.
	Alive map[string]bool
	// Shards and Replicas are the cluster's shard count and replication
	// factor.
	Shards, Replicas int
	// Moves allows moving replicas (every member knows command.Move);
	// without it, under-replicated shards are filled and nothing moves.
	Moves bool
}

// alive reports whether node id may receive a replica.
func (in *PlanInput) alive(id string) bool { return in.Alive == nil || in.Alive[id] }

// PlanPlacement returns the next placement, or nil if cur needs no change.
// The first placement puts shard i on nodes i, i+1, … (mod the node count),
// so shards and their first replicas spread evenly. Later, one step at a
// time:
//
//  1. a shard with fewer replicas than wanted gets the least loaded live
//     nodes it lacks (never a draining one);
//  2. a move whose target died is called off;
//  3. with no move under way, one replica moves: off a draining node
//     first, else (while no node holding replicas is down) from the most
//     loaded node to the least loaded live one when they differ by two or
//     more. A move adds its target to the
//     shard's replicas and records the move; the shard's leader catches
//     the target up as a non-voter, promotes it and then writes the
//     placement without the source (FinishMove).
//
// Only the meta leader writes it (a compare-and-set on the version).
func PlanPlacement(cur *command.Placement, in PlanInput) *command.Placement {
	if len(in.Nodes) == 0 {
		return nil
	}
	if cur == nil {
		want := min(in.Replicas, len(in.Nodes))
		p := &command.Placement{Version: 1, Shards: make([][]string, in.Shards)}
		for i := range p.Shards {
			for k := 0; k < want; k++ {
				p.Shards[i] = append(p.Shards[i], in.Nodes[(i+k)%len(in.Nodes)])
			}
		}
		return p
	}
	next := clonePlacement(cur)
	next.Version++
	// Draining nodes hold replicas but take none.
	var targets []string
	for _, id := range in.Nodes {
		if !slices.Contains(cur.Draining, id) {
			targets = append(targets, id)
		}
	}
	load := loads(cur, targets)
	want := min(in.Replicas, len(in.Nodes))
	changed := false
	for i := range next.Shards {
		for len(next.Shards[i]) < want {
			best := ""
			for _, id := range targets {
				if in.alive(id) && !slices.Contains(next.Shards[i], id) && (best == "" || load[id] < load[best]) {
					best = id
				}
			}
			if best == "" {
				break
			}
			next.Shards[i] = append(next.Shards[i], best)
			load[best]++
			changed = true
		}
	}
	if changed {
		return next
	}
	if len(cur.Moves) > 0 {
		m := cur.Moves[0]
		if in.alive(m.To) || int(m.Shard) >= len(next.Shards) {
			return nil // one move at a time
		}
		next.Shards[m.Shard] = slices.DeleteFunc(next.Shards[m.Shard], func(id string) bool { return id == m.To })
		next.Moves = next.Moves[1:]
		return next
	}
	if !in.Moves {
		return nil
	}
	if m, ok := planMove(cur, targets, load, in); ok {
		next.Shards[m.Shard] = append(next.Shards[m.Shard], m.To)
		next.Moves = []command.Move{m}
		return next
	}
	return nil
}

// planMove picks the next replica to move: one off a draining node, else
// one from the most to the least loaded live target.
func planMove(cur *command.Placement, targets []string, load map[string]int, in PlanInput) (command.Move, bool) {
	// The least loaded live target that lacks shard i.
	to := func(i int) string {
		best := ""
		for _, id := range targets {
			if in.alive(id) && !slices.Contains(cur.Shards[i], id) && (best == "" || load[id] < load[best]) {
				best = id
			}
		}
		return best
	}
	for _, d := range cur.Draining {
		for i, reps := range cur.Shards {
			if slices.Contains(reps, d) {
				if t := to(i); t != "" {
					return command.Move{Shard: command.ShardID(i), From: d, To: t}, true
				}
			}
		}
	}
	// Balance, only while every node holding replicas is alive: a dead
	// node's replicas come back when it does, or go elsewhere when it is
	// removed; moving others meanwhile only adds work to a cluster that is
	// short of a node. The most loaded target (ties to the first in order)
	// gives a shard to the least loaded live target lacking it.
	for _, reps := range cur.Shards {
		for _, id := range reps {
			if !in.alive(id) {
				return command.Move{}, false
			}
		}
	}
	from := ""
	for _, id := range targets {
		if from == "" || load[id] > load[from] {
			from = id
		}
	}
	for i, reps := range cur.Shards {
		if !slices.Contains(reps, from) {
			continue
		}
		if t := to(i); t != "" && load[from]-load[t] >= 2 {
			return command.Move{Shard: command.ShardID(i), From: from, To: t}, true
		}
	}
	return command.Move{}, false
}

// loads counts the replicas placed on each of nodes.
func loads(p *command.Placement, nodes []string) map[string]int {
	load := map[string]int{}
	for _, id := range nodes {
		load[id] = 0
	}
	for _, reps := range p.Shards {
		for _, id := range reps {
			if _, ok := load[id]; ok {
				load[id]++
			}
		}
	}
	return load
}

// FinishMove returns p after shard s's move: its source no longer among
// the shard's replicas and the move no longer recorded, at the next
// version; nil if s has no move.
func FinishMove(p *command.Placement, s command.ShardID) *command.Placement {
	m, ok := p.MoveOf(s)
	if !ok {
		return nil
	}
	next := clonePlacement(p)
	next.Version++
	next.Shards[s] = slices.DeleteFunc(next.Shards[s], func(id string) bool { return id == m.From })
	next.Moves = slices.DeleteFunc(next.Moves, func(x command.Move) bool { return x.Shard == s })
	return next
}

// Without returns p with node id taken out of every shard, every move
// and the draining list, and recorded as removed, at the next version.
func Without(p *command.Placement, id string) *command.Placement {
	next := clonePlacement(p)
	next.Version++
	for i := range next.Shards {
		next.Shards[i] = slices.DeleteFunc(next.Shards[i], func(r string) bool { return r == id })
	}
	for _, m := range p.Moves {
		if m.From == id || m.To == id {
			// The move's other node stays: it is a replica like any other
			// (the shard's leader promotes a target that stays).
			next.Moves = slices.DeleteFunc(next.Moves, func(x command.Move) bool { return x == m })
		}
	}
	next.Draining = slices.DeleteFunc(next.Draining, func(d string) bool { return d == id })
	next.Removed = append(next.Removed, id)
	return next
}

// Placed reports whether p puts a replica on node id.
func Placed(p *command.Placement, id string) bool {
	for _, reps := range p.Shards {
		if slices.Contains(reps, id) {
			return true
		}
	}
	return false
}

// clonePlacement returns a deep copy of p.
func clonePlacement(p *command.Placement) *command.Placement {
	next := &command.Placement{Version: p.Version, Shards: make([][]string, len(p.Shards)),
		Removed: slices.Clone(p.Removed), Moves: slices.Clone(p.Moves), Draining: slices.Clone(p.Draining)}
	for i, reps := range p.Shards {
		next.Shards[i] = slices.Clone(reps)
	}
	return next
}
