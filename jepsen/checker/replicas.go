package checker

import (
	"fmt"
	"sort"
	"strings"
)

// CheckReplicas compares the replicas of every group after recovery
// (etcd's robustness suite ends each run with the members' hashes): each
// node's digest of its replica of a group (GET /admin/v1/digest: the
// applied index and a hash of the links, or of the meta state) must be the
// same on every node at the same applied index. A member of a group's Raft
// configuration that reports no replica of it is an anomaly too. Replicas
// that never reached the same applied index make the verdict unknown.
func CheckReplicas(final Final) Result {
	res := Result{Checker: "replicas", Stats: map[string]int{}}
	byGroup := map[string]map[string]GroupDigest{} // group -> node -> digest
	for node, ds := range final.Digests {
		for _, d := range ds {
			if byGroup[d.Group] == nil {
				byGroup[d.Group] = map[string]GroupDigest{}
			}
			byGroup[d.Group][node] = d
		}
	}
	groups := make([]string, 0, len(byGroup))
	for g := range byGroup {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	var unsettled []string
	for _, g := range groups {
		reps := byGroup[g]
		for _, m := range final.Replicas[g] {
			if _, ok := reps[m]; !ok {
				res.add(Anomaly{Kind: "missing-replica", Detail: fmt.Sprintf("group %s: %s is a member but reports no replica of it", g, m)})
			}
		}
		nodes := sortedKeys(keysOf(reps))
		var index uint64
		same := true
		for i, n := range nodes {
			if i == 0 {
				index = reps[n].AppliedIndex
			} else if reps[n].AppliedIndex != index {
				same = false
			}
		}
		if !same {
			var at []string
			for _, n := range nodes {
				at = append(at, fmt.Sprintf("%s@%d", n, reps[n].AppliedIndex))
			}
			unsettled = append(unsettled, g+" ("+strings.Join(at, " ")+")")
			continue
		}
		res.Stats["groups-compared"]++
		res.Stats["replicas-compared"] += len(nodes)
		bySum := map[string][]string{}
		for _, n := range nodes {
			bySum[reps[n].Digest] = append(bySum[reps[n].Digest], n)
		}
		if len(bySum) > 1 {
			var parts []string
			for _, n := range nodes {
				parts = append(parts, fmt.Sprintf("%s: %d items, %s", n, reps[n].Items, reps[n].Digest[:min(12, len(reps[n].Digest))]))
			}
			res.add(Anomaly{Kind: "replicas-diverged", Detail: fmt.Sprintf("group %s at applied index %d: %s", g, index, strings.Join(parts, "; "))})
		}
	}
	res.Stats["unsettled-groups"] = len(unsettled)
	switch {
	case res.AnomalyCount > 0:
		res.Valid = Invalid
		res.Summary = fmt.Sprintf("%d groups whose replicas differ at the same applied index, or lack a member", res.AnomalyCount)
	case len(unsettled) > 0 || !final.Recovered:
		res.Valid = Unknown
		res.Summary = fmt.Sprintf("replicas never reached the same applied index: %s", strings.Join(unsettled, ", "))
	case res.Stats["groups-compared"] == 0:
		res.Valid = Unknown
		res.Summary = "no replica digests to compare"
	default:
		res.Summary = fmt.Sprintf("every replica of all %d groups is the same at the same applied index (%d replicas compared)",
			res.Stats["groups-compared"], res.Stats["replicas-compared"])
	}
	return res
}
