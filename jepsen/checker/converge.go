package checker

import (
	"fmt"
	"sort"
	"strings"

	"github.com/linkraft/linkraft/jepsen/history"
)

// CheckConverge checks guarantee 4 of DESIGN §6 on the register workload's
// codes: after an acknowledged update or delete, every node reflects it
// within the stated bound, and a deleted code stays deleted (410, its
// tombstone kept) on every node.
//
//   - final: once the cluster has recovered and the bound has passed since
//     recovery, each code's state is read linearizably (final.Truth), then
//     resolved on every node: each must redirect to that URL; a code that
//     existed and now reads as gone must answer 410, a code that may never
//     have existed 404 or 410.
//   - during the run: a redirect of a code after its create or delete was
//     acknowledged never answers 404 (the tombstone was lost or the create
//     forgotten). A stale redirect during a fault is within the bound (apply
//     lag) and not judged.
func CheckConverge(ops []history.Op, final Final) Result {
	res := Result{Checker: "converge", Stats: map[string]int{}}
	pairs, err := history.Pairs(ops)
	if err != nil {
		res.Valid, res.Summary = Unknown, err.Error()
		return res
	}
	// When each code was first known to exist: an acknowledged create,
	// update or delete, or a read that saw a URL.
	existed := map[string]int64{}
	note := func(code string, t int64) {
		if old, ok := existed[code]; !ok || t < old {
			existed[code] = t
		}
	}
	for _, p := range pairs {
		c := p.Completion
		if p.Invoke.Workload != "register" || c == nil || c.Type != history.OK {
			continue
		}
		switch p.Invoke.F {
		case FCreate, FUpdate, FDelete:
			note(p.Invoke.Key, c.Time)
		case FRead:
			if c.Value != "" {
				note(p.Invoke.Key, c.Time)
			}
		}
	}
	// Redirect probes during the run.
	for _, p := range pairs {
		c := p.Completion
		if p.Invoke.Workload != "register" || p.Invoke.F != FResolve || c == nil || c.Type != history.OK {
			continue
		}
		res.Stats["probes"]++
		if t, ok := existed[p.Invoke.Key]; ok && t < p.Invoke.Time && c.Status == 404 {
			res.add(Anomaly{Kind: "tombstone-lost", Detail: fmt.Sprintf("%s existed (known at %.3fs) but %s answered 404 at %.3fs: a deleted code must answer 410",
				p.Invoke.Key, seconds(t), p.Invoke.Node, seconds(p.Invoke.Time)), Ops: []history.Op{p.Invoke, *c}})
		}
	}
	codes := make([]string, 0, len(final.Truth))
	for c := range final.Truth {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	unreadable := 0
	for _, c := range codes {
		truth := final.Truth[c]
		// 410: the API read a tombstone, so the code was deleted even if
		// no acknowledged operation of the history shows it ever lived
		// (its create was indeterminate).
		deleted := truth.Status == 410
		if deleted {
			truth.Status = 404 // no live link, either way
		}
		if truth.Error != "" || (truth.Status != 200 && truth.Status != 404) {
			unreadable++
			continue
		}
		res.Stats["codes"]++
		_, wasLive := existed[c]
		wasLive = wasLive || deleted
		var stale, lost []string
		for _, node := range final.Nodes {
			r, ok := final.Resolves[node][c]
			switch {
			case !ok || r.Error != "" || r.Status >= 500:
				unreadable++
			case truth.Status == 200 && isRedirect(r.Status) && r.Location == truth.Location:
			case truth.Status == 404 && r.Status == 410:
				res.Stats["tombstones-checked"]++
			case truth.Status == 404 && r.Status == 404 && !wasLive:
			case truth.Status == 404 && r.Status == 404:
				lost = append(lost, node)
			default:
				stale = append(stale, fmt.Sprintf("%s: %d %s", node, r.Status, r.Location))
			}
		}
		if len(lost) > 0 {
			res.add(Anomaly{Kind: "tombstone-lost", Detail: fmt.Sprintf("%s was deleted, but %s answer 404 instead of 410", c, strings.Join(lost, ", "))})
		}
		if len(stale) > 0 {
			want := "gone (410)"
			if truth.Status == 200 {
				want = truth.Location
			} else if !wasLive {
				want = "unknown or gone (404/410)"
			}
			res.add(Anomaly{Kind: "stale-after-bound", Detail: fmt.Sprintf("%s is %s, but %s", c, want, strings.Join(stale, ", "))})
		}
	}
	res.Stats["unreadable"] = unreadable
	switch {
	case res.AnomalyCount > 0:
		res.Valid = Invalid
		res.Summary = fmt.Sprintf("%d anomalies: codes stale or tombstones lost on some node after the bound (%d codes)", res.AnomalyCount, res.Stats["codes"])
	case unreadable > 0 || !final.Recovered || res.Stats["codes"] == 0:
		res.Valid = Unknown
		res.Summary = fmt.Sprintf("%d final reads failed or nothing to check", unreadable)
	default:
		res.Valid = Valid
		res.Summary = fmt.Sprintf("all %d register codes read the same on all %d nodes once the staleness bound passed since recovery (%d deleted codes answer 410 everywhere; %d redirect probes of tombstones, none 404)",
			res.Stats["codes"], len(final.Nodes), res.Stats["tombstones-checked"]/max(len(final.Nodes), 1), res.Stats["probes"])
	}
	return res
}

func seconds(ns int64) float64 { return float64(ns) / 1e9 }
