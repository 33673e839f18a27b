package checker

import (
	"fmt"
	"sort"
	"strings"
)

// CheckConverge checks guarantee 4 of DESIGN §6: after an acknowledged
// update or delete, every node reflects it within the stated bound. The
// harness reads each register code linearizably after the cluster has
// recovered and the bound has passed since the last acknowledged write
// (final.Truth), then resolves it on every node: each must redirect to that
// URL, or answer 404/410 if the link is gone.
func CheckConverge(final Final) Result {
	res := Result{Checker: "converge", Stats: map[string]int{}}
	codes := make([]string, 0, len(final.Truth))
	for c := range final.Truth {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	unreadable := 0
	for _, c := range codes {
		truth := final.Truth[c]
		if truth.Error != "" || (truth.Status != 200 && truth.Status != 404) {
			unreadable++
			continue
		}
		res.Stats["codes"]++
		var stale []string
		for _, node := range final.Nodes {
			r, ok := final.Resolves[node][c]
			switch {
			case !ok || r.Error != "" || r.Status >= 500:
				unreadable++
			case truth.Status == 200 && isRedirect(r.Status) && r.Location == truth.Location:
			case truth.Status == 404 && (r.Status == 404 || r.Status == 410):
			default:
				stale = append(stale, fmt.Sprintf("%s: %d %s", node, r.Status, r.Location))
			}
		}
		if len(stale) > 0 {
			want := "gone (404/410)"
			if truth.Status == 200 {
				want = truth.Location
			}
			res.add(Anomaly{Kind: "stale-after-bound", Detail: fmt.Sprintf("%s is %s, but %s", c, want, strings.Join(stale, ", "))})
		}
	}
	res.Stats["unreadable"] = unreadable
	switch {
	case res.AnomalyCount > 0:
		res.Valid = Invalid
		res.Summary = fmt.Sprintf("%d of %d codes still stale on some node after the bound", res.AnomalyCount, res.Stats["codes"])
	case unreadable > 0 || !final.Recovered || res.Stats["codes"] == 0:
		res.Valid = Unknown
		res.Summary = fmt.Sprintf("%d final reads failed or nothing to check", unreadable)
	default:
		res.Valid = Valid
		res.Summary = fmt.Sprintf("all %d register codes read the same on all %d nodes once the staleness bound passed", res.Stats["codes"], len(final.Nodes))
	}
	return res
}
