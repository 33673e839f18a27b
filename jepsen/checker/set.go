package checker

import (
	"fmt"
	"sort"
	"strings"

	"github.com/linkraft/linkraft/jepsen/history"
)

// generatedCreates are the creates with a generated code (the set,
// unique-ids and ryw workloads), keyed by the URL each attempt wrote (unique per attempt).
func generatedCreates(ops []history.Op) (map[string]history.Pair, error) {
	pairs, err := history.Pairs(ops)
	if err != nil {
		return nil, err
	}
	out := map[string]history.Pair{}
	for _, p := range pairs {
		if p.Invoke.F == FCreate && (p.Invoke.Workload == "set" || p.Invoke.Workload == "unique-ids" || p.Invoke.Workload == "ryw") {
			out[p.Invoke.Value] = p
		}
	}
	return out, nil
}

func isRedirect(status int) bool {
	return status == 301 || status == 302 || status == 307 || status == 308
}

// CheckSet checks that, after recovery, every acknowledged create resolves
// to its URL on every node, and that no link appears that nobody tried to
// create, or twice for one attempt. A create with an unknown outcome may go
// either way, but once any node holds it, it is known (Jepsen's set-full):
// it must then resolve on every node too. urlPrefix marks this run's set
// and ryw URLs in the listings.
func CheckSet(ops []history.Op, final Final, urlPrefix string) Result {
	c := &setCheck{res: Result{Checker: "set", Stats: map[string]int{}}, final: final, prefix: urlPrefix}
	creates, err := generatedCreates(ops)
	if err != nil {
		c.res.Valid, c.res.Summary = Unknown, err.Error()
		return c.res
	}
	for url, p := range creates {
		done := p.Completion
		switch {
		case done == nil || done.Type == history.Info:
			c.res.Stats["indeterminate"]++
			continue
		case done.Type == history.Fail:
			c.res.Stats["failed"]++
			continue
		}
		c.res.Stats["acknowledged"]++
		c.everywhere(done.Key, url, []history.Op{p.Invoke, *done}, "acknowledged")
	}
	codesOf, urls := c.stored()
	c.checkStored(creates, codesOf, urls)
	c.checkListings(codesOf, urls)
	c.verdict()
	return c.res
}

// setCheck is one run of CheckSet.
type setCheck struct {
	res        Result
	final      Final
	prefix     string
	unreadable int
}

// everywhere checks that code resolves to url on every node.
func (c *setCheck) everywhere(code, url string, ops []history.Op, known string) {
	var missing, wrong []string
	for _, node := range c.final.Nodes {
		r, ok := c.final.Resolves[node][code]
		switch {
		case !ok || r.Error != "" || r.Status >= 500:
			c.unreadable++
		case isRedirect(r.Status) && r.Location == url:
		case isRedirect(r.Status):
			wrong = append(wrong, fmt.Sprintf("%s -> %s", node, r.Location))
		default:
			missing = append(missing, fmt.Sprintf("%s: %d", node, r.Status))
		}
	}
	switch {
	case len(wrong) > 0:
		c.res.add(Anomaly{Kind: "wrong-url", Detail: fmt.Sprintf("code %s was created for %s but resolves to another URL: %s", code, url, strings.Join(wrong, ", ")), Ops: ops})
	case len(missing) == len(c.final.Nodes):
		c.res.Stats["lost"]++
		c.res.add(Anomaly{Kind: "lost", Detail: fmt.Sprintf("%s create of %s (%s) resolves on no node: %s", known, code, url, strings.Join(missing, ", ")), Ops: ops})
	case len(missing) > 0:
		c.res.add(Anomaly{Kind: "not-everywhere", Detail: fmt.Sprintf("%s create of %s (%s) does not resolve on %s", known, code, url, strings.Join(missing, ", ")), Ops: ops})
	}
}

// stored returns the codes the nodes store under each of this run's URLs,
// and those URLs in order.
func (c *setCheck) stored() (map[string]map[string]bool, []string) {
	codesOf := map[string]map[string]bool{} // URL -> codes
	for _, node := range c.final.Nodes {
		for _, l := range c.final.Links[node] {
			if l.Deleted || !isGeneratedURL(l.URL, c.prefix) {
				continue
			}
			if codesOf[l.URL] == nil {
				codesOf[l.URL] = map[string]bool{}
			}
			codesOf[l.URL][l.Code] = true
		}
	}
	urls := make([]string, 0, len(codesOf))
	for u := range codesOf {
		urls = append(urls, u)
	}
	sort.Strings(urls)
	return codesOf, urls
}

// checkStored checks what is stored against what was tried: nothing
// nobody tried, one link per attempt, and a stored indeterminate create
// on every node.
func (c *setCheck) checkStored(creates map[string]history.Pair, codesOf map[string]map[string]bool, urls []string) {
	for _, u := range urls {
		codes := sortedKeys(codesOf[u])
		p, tried := creates[u]
		switch {
		case !tried:
			c.res.add(Anomaly{Kind: "unexpected", Detail: fmt.Sprintf("%s stored under %v, but no client ever tried to create it", u, codes)})
		case len(codes) > 1:
			c.res.add(Anomaly{Kind: "duplicated", Detail: fmt.Sprintf("one create of %s made %d links: %v", u, len(codes), codes), Ops: []history.Op{p.Invoke}})
		case p.Completion != nil && p.Completion.Type == history.OK && codes[0] != p.Completion.Key:
			c.res.add(Anomaly{Kind: "duplicated", Detail: fmt.Sprintf("create of %s was acknowledged as %s but is stored as %s", u, p.Completion.Key, codes[0]), Ops: []history.Op{p.Invoke, *p.Completion}})
		case p.Completion == nil || p.Completion.Type == history.Info:
			// Seen on some node: known, so it must be on every node.
			c.res.Stats["indeterminate-stored"]++
			ops := []history.Op{p.Invoke}
			if p.Completion != nil {
				ops = append(ops, *p.Completion)
			}
			c.everywhere(codes[0], u, ops, "indeterminate (seen stored)")
		case p.Completion.Type == history.Fail:
			c.res.add(Anomaly{Kind: "failed-but-stored", Detail: fmt.Sprintf("create of %s failed definitely (%d) but is stored as %s", u, p.Completion.Status, codes[0]), Ops: []history.Op{p.Invoke, *p.Completion}})
		}
	}
}

// checkListings checks that the API's listing through every node holds
// exactly the links the nodes store under this run's URLs, each once.
func (c *setCheck) checkListings(codesOf map[string]map[string]bool, urls []string) {
	for _, node := range c.final.Nodes {
		listed, ok := c.final.APIListed[node]
		if !ok {
			c.unreadable++
			continue
		}
		c.res.Stats["api-listings"]++
		seen := map[string]bool{}
		var extra, twice []string
		for _, l := range listed {
			if !isGeneratedURL(l.URL, c.prefix) {
				continue
			}
			if seen[l.Code] {
				twice = append(twice, l.Code)
			}
			seen[l.Code] = true
			if !codesOf[l.URL][l.Code] {
				extra = append(extra, l.Code+" "+l.URL)
			}
		}
		var missing []string
		for _, u := range urls {
			for code := range codesOf[u] {
				if !seen[code] {
					missing = append(missing, code+" "+u)
				}
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 || len(extra) > 0 || len(twice) > 0 {
			c.res.add(Anomaly{Kind: "listing-differs", Detail: fmt.Sprintf("GET /api/v1/links through %s: %d stored links missing %v, %d listed but stored nowhere %v, %d listed twice %v",
				node, len(missing), head(missing), len(extra), head(extra), len(twice), head(twice))})
		}
	}
}

// verdict sums the check up.
func (c *setCheck) verdict() {
	res := &c.res
	res.Stats["unreadable-final-reads"] = c.unreadable
	switch {
	case res.AnomalyCount > 0:
		res.Valid = Invalid
		res.Summary = fmt.Sprintf("%d anomalies among %d acknowledged creates", res.AnomalyCount, res.Stats["acknowledged"])
	case !c.final.Recovered || c.unreadable > 0:
		res.Valid = Unknown
		res.Summary = fmt.Sprintf("the cluster did not recover: %d final reads failed", c.unreadable)
	case res.Stats["acknowledged"] == 0:
		res.Valid = Unknown
		res.Summary = "no create was acknowledged"
	default:
		res.Valid = Valid
		res.Summary = fmt.Sprintf("all %d acknowledged creates and %d indeterminate ones seen stored resolve on all %d nodes; nothing unexpected stored",
			res.Stats["acknowledged"], res.Stats["indeterminate-stored"], len(c.final.Nodes))
	}
}

// RegisterPath is where register-workload URLs live under a run's prefix.
const RegisterPath = "register/"

// isGeneratedURL: the URL of a create with a generated code (set,
// unique-ids, ryw) of this run.
func isGeneratedURL(u, prefix string) bool {
	for _, w := range []string{"set/", "unique-ids/", "ryw/"} {
		if strings.HasPrefix(u, prefix+w) {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// head is at most the first 5 of xs, for an anomaly's detail.
func head(xs []string) []string { return xs[:min(len(xs), 5)] }
