package checker

import (
	"fmt"

	"github.com/linkraft/linkraft/jepsen/history"
)

// FResolve is the ryw workload's redirect read.
const FResolve = "resolve"

// CheckRYW checks read-your-writes across nodes: a redirect on node j
// invoked after a create on node i was acknowledged must find the link. A
// 404 or 410 (or another URL) there is an anomaly; a timeout is not.
func CheckRYW(ops []history.Op) Result {
	res := Result{Checker: "ryw", Stats: map[string]int{}}
	pairs, err := history.Pairs(ops)
	if err != nil {
		res.Valid, res.Summary = Unknown, err.Error()
		return res
	}
	acked := map[string]history.Pair{} // code -> acknowledged create
	for _, p := range pairs {
		if p.Invoke.Workload == "ryw" && p.Invoke.F == FCreate && p.Completion != nil && p.Completion.Type == history.OK {
			acked[p.Completion.Key] = p
		}
	}
	for _, p := range pairs {
		if p.Invoke.Workload != "ryw" || p.Invoke.F != FResolve {
			continue
		}
		c := p.Completion
		if c == nil || c.Type != history.OK {
			res.Stats["unavailable"]++
			continue
		}
		cr, ok := acked[p.Invoke.Key]
		if !ok || cr.Completion.Time > p.Invoke.Time {
			continue // not a read after an acknowledged create
		}
		res.Stats["checked"]++
		url := cr.Invoke.Value
		if isRedirect(c.Status) && c.Value == url {
			continue
		}
		kind := "stale-read"
		if isRedirect(c.Status) {
			kind = "wrong-url"
		}
		res.add(Anomaly{Kind: kind, Detail: fmt.Sprintf("%s created %s on %s (acknowledged at %d ns); %s answered %d %s at %d ns",
			p.Invoke.Key, url, cr.Invoke.Node, cr.Completion.Time, p.Invoke.Node, c.Status, c.Value, p.Invoke.Time),
			Ops: []history.Op{cr.Invoke, *cr.Completion, p.Invoke, *c}})
	}
	switch {
	case res.AnomalyCount > 0:
		res.Valid = Invalid
		res.Summary = fmt.Sprintf("%d of %d reads on another node missed an acknowledged create", res.AnomalyCount, res.Stats["checked"])
	case res.Stats["checked"] == 0:
		res.Valid = Unknown
		res.Summary = "no read followed an acknowledged create"
	default:
		res.Valid = Valid
		res.Summary = fmt.Sprintf("%d reads on another node right after an acknowledged create all found it", res.Stats["checked"])
	}
	return res
}
