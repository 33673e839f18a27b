package meta

import (
	"slices"

	"github.com/linkraft/linkraft/command"
)

// PlanPlacement returns the next placement, or nil if cur needs no change.
// The first placement puts shard i on nodes i, i+1, … (mod the node count),
// so shards and their first replicas spread evenly. Later, a shard with
// fewer replicas than wanted gets the least loaded nodes it lacks. Only
// the meta leader writes it (a compare-and-set on the version), from the
// nodes of the meta group that were not removed.
func PlanPlacement(cur *command.Placement, nodes []string, shards, replicas int) *command.Placement {
	if len(nodes) == 0 {
		return nil
	}
	want := min(replicas, len(nodes))
	if cur == nil {
		p := &command.Placement{Version: 1, Shards: make([][]string, shards)}
		for i := range p.Shards {
			for k := 0; k < want; k++ {
				p.Shards[i] = append(p.Shards[i], nodes[(i+k)%len(nodes)])
			}
		}
		return p
	}
	load := map[string]int{}
	for _, id := range nodes {
		load[id] = 0
	}
	for _, reps := range cur.Shards {
		for _, id := range reps {
			load[id]++
		}
	}
	next := &command.Placement{Version: cur.Version + 1, Shards: make([][]string, len(cur.Shards)), Removed: cur.Removed}
	changed := false
	for i, reps := range cur.Shards {
		next.Shards[i] = slices.Clone(reps)
		for len(next.Shards[i]) < want {
			best := ""
			for _, id := range nodes {
				if slices.Contains(next.Shards[i], id) {
					continue
				}
				if best == "" || load[id] < load[best] {
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
	if !changed {
		return nil
	}
	return next
}
