package checker

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/linkraft/linkraft/jepsen/history"
)

// FClick is the counter workload's click (a redirect).
const FClick = "click"

// CounterOptions are the counter checker's bounds.
type CounterOptions struct {
	// LossWindow is how long before a SIGKILL a node's acknowledged clicks
	// may still be unflushed, and so lost (DESIGN §6: bounded by the flush
	// interval, plus the time a batch needs to commit).
	LossWindow time.Duration
	// Recovery is how long after a fault ends the cluster may still be
	// unable to commit (killed nodes restarting, elections).
	Recovery time.Duration
	// Kills are SIGKILLs the nemesis caused, as the nodes' runs recorded
	// them (node → times): a crash point fires while a fault is in force,
	// not when its start is recorded. Taken with those the nemesis
	// history names.
	Kills map[string][]int64
}

// CheckCounter checks click counting (DESIGN guarantee 6, Jepsen's counter
// with a relaxed lower bound):
//   - never over-counted: every read, during the run and at the end, is at
//     most the clicks that were served or may have been (ok + info)
//     invoked before the read returned;
//   - under-counting bounded: at the end, after recovery, every node reports
//     at least the acknowledged clicks minus those a killed node had not had
//     the LossWindow to commit when it was killed. A click's window starts
//     when it was served or, if a fault was in force then (its shard may
//     have had no quorum), Recovery after that fault ended: DESIGN's bound
//     is the flush interval of a node whose shards can commit.
func CheckCounter(ops []history.Op, final Final, opt CounterOptions) Result {
	res := Result{Checker: "counter", Stats: map[string]int{}}
	pairs, err := history.Pairs(ops)
	if err != nil {
		res.Valid, res.Summary = Unknown, err.Error()
		return res
	}
	// Kill times per node, from the nemesis's kills.
	kills := map[string][]int64{}
	for _, op := range ops {
		if op.Process == history.NemesisProcess && op.F == "start" && op.Type == history.OK {
			for _, n := range killedNodes(op.Value) {
				kills[n] = append(kills[n], op.Time)
			}
		}
	}
	for n, times := range opt.Kills {
		kills[n] = append(kills[n], times...)
	}
	faults := faultSpans(ops)
	type click struct {
		invoke, done int64
		node         string
		ok           bool
	}
	clicks := map[string][]click{} // code -> served or maybe-served clicks
	var reads []history.Pair
	for _, p := range pairs {
		if p.Invoke.Workload != "counter" || p.Completion == nil {
			continue
		}
		switch p.Invoke.F {
		case FClick:
			switch p.Completion.Type {
			case history.OK:
				clicks[p.Invoke.Key] = append(clicks[p.Invoke.Key], click{p.Invoke.Time, p.Completion.Time, p.Invoke.Node, true})
				res.Stats["ok-clicks"]++
			case history.Info:
				clicks[p.Invoke.Key] = append(clicks[p.Invoke.Key], click{p.Invoke.Time, p.Completion.Time, p.Invoke.Node, false})
				res.Stats["info-clicks"]++
			}
		case FRead:
			if p.Completion.Type == history.OK {
				reads = append(reads, p)
			}
		}
	}
	res.Stats["reads"] = len(reads)
	// Upper bound for each read during the run.
	for _, p := range reads {
		v, _ := strconv.ParseUint(p.Completion.Value, 10, 64)
		var upper uint64
		for _, c := range clicks[p.Invoke.Key] {
			if c.invoke <= p.Completion.Time {
				upper++
			}
		}
		if v > upper {
			res.add(Anomaly{Kind: "over-count", Detail: fmt.Sprintf("%s read %d clicks on %s, but at most %d clicks had been invoked", p.Invoke.Key, v, p.Invoke.Node, upper), Ops: []history.Op{p.Invoke, *p.Completion}})
		}
	}
	// Final bounds.
	codes := make([]string, 0, len(clicks))
	for c := range clicks {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	maxLag := 0
	for _, code := range codes {
		var ok, upper, mayLose uint64
		for _, c := range clicks[code] {
			upper++
			if !c.ok {
				continue
			}
			ok++
			from := committable(c.done, faults, opt.Recovery)
			for _, k := range kills[c.node] {
				if c.done <= k && k-from <= int64(opt.LossWindow) {
					mayLose++
					break
				}
			}
		}
		for _, node := range final.Nodes {
			v, read := final.Counters[node][code]
			switch {
			case !read:
				res.Stats["unreadable-final"]++
			case v > upper:
				res.add(Anomaly{Kind: "over-count", Detail: fmt.Sprintf("%s: %s counts %d clicks, but only %d were ever invoked", code, node, v, upper)})
			case v+mayLose < ok:
				res.add(Anomaly{Kind: "lost-clicks", Detail: fmt.Sprintf("%s: %s counts %d clicks; %d were acknowledged and at most %d could be lost to kills", code, node, v, ok, mayLose)})
			default:
				if lag := int(ok) - int(v); lag > maxLag {
					maxLag = lag
				}
			}
		}
		res.Stats["may-lose"] += int(mayLose)
	}
	res.Stats["max-under-count"] = maxLag
	switch {
	case res.AnomalyCount > 0:
		res.Valid = Invalid
		res.Summary = fmt.Sprintf("%d counter anomalies", res.AnomalyCount)
	case res.Stats["ok-clicks"] == 0 || res.Stats["unreadable-final"] > 0 || !final.Recovered:
		res.Valid = Unknown
		res.Summary = "no acknowledged clicks, or final counters unreadable"
	default:
		res.Valid = Valid
		res.Summary = fmt.Sprintf("%d acknowledged clicks (+%d indeterminate) never over-counted in %d reads; final counts on every node within bounds (largest under-count %d, %d allowed by kills)",
			res.Stats["ok-clicks"], res.Stats["info-clicks"], len(reads), maxLag, res.Stats["may-lose"])
	}
	return res
}

// faultSpans are the nemesis's faults, each from its start's invocation to
// its stop's completion (the end of the history if it never stopped).
func faultSpans(ops []history.Op) [][2]int64 {
	var spans [][2]int64
	open := map[string]int64{}
	var last int64
	for _, op := range ops {
		last = max(last, op.Time)
		if op.Process != history.NemesisProcess {
			continue
		}
		switch {
		case op.F == "start" && op.Type == history.Invoke:
			open[op.Workload] = op.Time
		case op.F == "stop" && op.Type == history.OK:
			if t, ok := open[op.Workload]; ok {
				spans = append(spans, [2]int64{t, op.Time})
				delete(open, op.Workload)
			}
		}
	}
	for _, t := range open {
		spans = append(spans, [2]int64{t, last})
	}
	return spans
}

// committable is when a click served at done could first be committed:
// done itself, unless a fault was in force then or had ended less than
// recovery before; then that fault's end plus recovery.
func committable(done int64, faults [][2]int64, recovery time.Duration) int64 {
	from := done
	for _, f := range faults {
		if f[0] <= done && done < f[1]+int64(recovery) {
			from = max(from, f[1]+int64(recovery))
		}
	}
	return from
}

// killedNodes are the nodes a fault's start entry says were SIGKILLed:
// "SIGKILL n1 n3" (a composed fault says more after the names, in
// parentheses) or a power cut, "power cut to n1 n2 n3: SIGKILL, then …"
// (every node crashes at once: what a node had not flushed is lost as to
// a kill).
func killedNodes(value string) []string {
	var names string
	switch {
	case strings.HasPrefix(value, "SIGKILL "):
		names = strings.TrimPrefix(value, "SIGKILL ")
		if i := strings.Index(names, "("); i >= 0 {
			names = names[:i]
		}
	case strings.HasPrefix(value, "power cut to "):
		names, _, _ = strings.Cut(strings.TrimPrefix(value, "power cut to "), ":")
	}
	return strings.Fields(names)
}
