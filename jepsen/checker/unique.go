package checker

import (
	"fmt"
	"sort"

	"github.com/linkraft/linkraft/jepsen/history"
)

// CheckUniqueIDs checks that no two acknowledged creates returned the same
// code, that the ID ranges the meta group granted never overlap (from every
// node's full grant history, keyed by Raft index), and that every generated
// code comes from a range leased to the node that made it.
// decode maps a generated code back to its ID.
func CheckUniqueIDs(ops []history.Op, final Final, decode func(code string) (uint64, error)) Result {
	res := Result{Checker: "unique-ids", Stats: map[string]int{}}
	creates, err := generatedCreates(ops)
	if err != nil {
		res.Valid, res.Summary = Unknown, err.Error()
		return res
	}
	byCode := map[string][]history.Pair{}
	for _, p := range creates {
		res.Stats["attempted"]++
		if p.Completion != nil && p.Completion.Type == history.OK {
			byCode[p.Completion.Key] = append(byCode[p.Completion.Key], p)
		}
	}
	res.Stats["acknowledged"] = 0
	codes := make([]string, 0, len(byCode))
	for c, ps := range byCode {
		codes = append(codes, c)
		res.Stats["acknowledged"] += len(ps)
	}
	sort.Strings(codes)
	for _, c := range codes {
		if ps := byCode[c]; len(ps) > 1 {
			a := Anomaly{Kind: "duplicate-code", Detail: fmt.Sprintf("%d acknowledged creates returned code %s", len(ps), c)}
			for _, p := range ps {
				a.Ops = append(a.Ops, p.Invoke, *p.Completion)
			}
			res.add(a)
		}
	}
	// Every grant any node's meta replica applied (the same grant, seen on
	// several nodes, once); each is a record of its own, so a start
	// granted twice shows as two overlapping grants.
	seen := map[Lease]bool{}
	var leases []Lease
	for _, node := range sortedKeys(keysOf(final.Leases)) {
		for _, l := range final.Leases[node] {
			if !seen[l] {
				seen[l] = true
				leases = append(leases, l)
			}
		}
	}
	sort.Slice(leases, func(i, j int) bool {
		if leases[i].Start != leases[j].Start {
			return leases[i].Start < leases[j].Start
		}
		return leases[i].Index < leases[j].Index
	})
	res.Stats["leases"] = len(leases)
	reach := 0 // index of the lease reaching furthest so far
	for i := 1; i < len(leases); i++ {
		if leases[i].Start < leases[reach].End {
			res.add(Anomaly{Kind: "overlapping-leases", Detail: fmt.Sprintf("lease %s overlaps %s", pretty(leases[i]), pretty(leases[reach]))})
		}
		if leases[i].End > leases[reach].End {
			reach = i
		}
	}
	for _, c := range codes {
		p := byCode[c][0]
		id, err := decode(c)
		if err != nil {
			res.add(Anomaly{Kind: "undecodable-code", Detail: fmt.Sprintf("code %s is not a generated code: %v", c, err), Ops: []history.Op{p.Invoke, *p.Completion}})
			continue
		}
		i := sort.Search(len(leases), func(i int) bool { return leases[i].End > id })
		switch {
		case i == len(leases) || leases[i].Start > id:
			res.add(Anomaly{Kind: "outside-leases", Detail: fmt.Sprintf("code %s (id %d) lies in no leased range", c, id), Ops: []history.Op{p.Invoke, *p.Completion}})
		case leases[i].Node != p.Invoke.Node:
			res.add(Anomaly{Kind: "foreign-lease", Detail: fmt.Sprintf("code %s (id %d) was made by %s from %s's lease %s", c, id, p.Invoke.Node, leases[i].Node, pretty(leases[i])), Ops: []history.Op{p.Invoke, *p.Completion}})
		}
	}
	switch {
	case res.AnomalyCount > 0:
		res.Valid = Invalid
		res.Summary = fmt.Sprintf("%d anomalies among %d acknowledged codes and %d leases", res.AnomalyCount, len(codes), len(leases))
	case len(codes) == 0 || len(leases) == 0:
		res.Valid = Unknown
		res.Summary = "no acknowledged codes or no leases to check"
	default:
		res.Valid = Valid
		res.Summary = fmt.Sprintf("%d acknowledged codes are distinct and each lies in a lease of its node; %d leases never overlap", len(codes), len(leases))
	}
	return res
}

func keysOf[V any](m map[string]V) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}
