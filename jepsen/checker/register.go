package checker

import (
	"fmt"
	"hash/fnv"
	"math"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/linkraft/linkraft/jepsen/history"
)

// The register workload's operation names (Op.F).
const (
	FCreate = "create"
	FUpdate = "update"
	FDelete = "delete"
	FRead   = "read"
)

// regIn is a register operation's input.
type regIn struct {
	F   string
	Key string
	URL string // written (create, update)
}

// regOut is its outcome.
type regOut struct {
	Unknown bool   // info: the write may or may not have happened
	OK      bool   // create/update/delete took effect; read found a link
	URL     string // read: the URL seen
}

// Register states: "" no link yet, deleted a tombstone, otherwise the URL.
const deleted = "\x00deleted"

func present(s string) bool { return s != "" && s != deleted }

// RegisterModel is the per-code model of a link: create succeeds only on a
// code never used (tombstones stay taken), update and delete only on a live
// link, and a linearizable read sees the live URL or nothing. Operations
// with an unknown outcome take their effect if the state allows it.
var RegisterModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			k := op.Input.(regIn).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		st, in, out := state.(string), input.(regIn), output.(regOut)
		switch in.F {
		case FRead:
			if out.Unknown {
				return true, st
			}
			if !out.OK {
				return !present(st), st
			}
			return present(st) && out.URL == st, st
		case FCreate:
			next := st
			if st == "" {
				next = in.URL
			}
			return out.Unknown || out.OK == (st == ""), next
		case FUpdate:
			next := st
			if present(st) {
				next = in.URL
			}
			return out.Unknown || out.OK == present(st), next
		case FDelete:
			next := st
			if present(st) {
				next = deleted
			}
			return out.Unknown || out.OK == present(st), next
		}
		return false, st
	},
	Hash: func(state any) uint64 {
		h := fnv.New64a()
		_, _ = h.Write([]byte(state.(string)))
		return h.Sum64()
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(regIn), output.(regOut)
		res := "ok"
		switch {
		case out.Unknown:
			res = "unknown"
		case in.F == FRead && out.OK:
			res = out.URL
		case in.F == FRead:
			res = "404"
		case !out.OK:
			res = "refused"
		}
		if in.F == FRead || in.F == FDelete {
			return fmt.Sprintf("%s(%s) -> %s", in.F, in.Key, res)
		}
		return fmt.Sprintf("%s(%s, %s) -> %s", in.F, in.Key, in.URL, res)
	},
	DescribeState: func(state any) string {
		switch s := state.(string); s {
		case "":
			return "(none)"
		case deleted:
			return "(deleted)"
		default:
			return s
		}
	},
}

// registerOps turns the register workload's history into porcupine
// operations. A read that failed or timed out is dropped (it has no
// effect); a write that failed definitely (409 on create, 404 on update or
// delete) is kept as a refusal, which says something about the state; an
// indeterminate write never returns.
func registerOps(ops []history.Op) ([]porcupine.Operation, map[int]history.Pair, error) {
	pairs, err := history.Pairs(ops)
	if err != nil {
		return nil, nil, err
	}
	var out []porcupine.Operation
	src := map[int]history.Pair{}
	for _, p := range pairs {
		inv, c := p.Invoke, p.Completion
		if inv.Workload != "register" || inv.F == FResolve {
			continue // redirects are not linearizable reads (converge judges them)
		}
		in := regIn{F: inv.F, Key: inv.Key, URL: inv.Value}
		var o regOut
		ret := int64(math.MaxInt64)
		switch {
		case c == nil || c.Type == history.Info:
			if inv.F == FRead {
				continue
			}
			o.Unknown = true
		case c.Type == history.Fail:
			// Only "taken" (409 on create) and "no such link" (404 on
			// update or delete) say something about the state; any other
			// definite failure (a 400, say) had no effect at all.
			refusal := (inv.F == FCreate && c.Status == 409) || ((inv.F == FUpdate || inv.F == FDelete) && c.Status == 404)
			if !refusal {
				continue
			}
			o.OK = false
			ret = c.Time
		case c.Type == history.OK:
			o.OK = true
			if inv.F == FRead {
				o.OK = c.Status == 200
				o.URL = c.Value
			}
			ret = c.Time
		}
		src[len(out)] = p
		out = append(out, porcupine.Operation{ClientId: inv.Process, Input: in, Call: inv.Time, Output: o, Return: ret})
	}
	return out, src, nil
}

// RegisterOptions tunes CheckRegister.
type RegisterOptions struct {
	// Timeout bounds porcupine's search (0: 2 minutes); past it the verdict
	// is unknown.
	Timeout time.Duration
	// HTMLPath, if set, receives porcupine's visualization.
	HTMLPath string
	// Annotations are added to the visualization (nemesis windows).
	Annotations []porcupine.Annotation
}

// CheckRegister checks per-code linearizability of the register workload
// with porcupine.
func CheckRegister(ops []history.Op, opt RegisterOptions) Result {
	res := Result{Checker: "register", Stats: map[string]int{}}
	pops, src, err := registerOps(ops)
	if err != nil {
		res.Valid, res.Summary = Unknown, err.Error()
		return res
	}
	keys := map[string]bool{}
	for _, op := range pops {
		in, out := op.Input.(regIn), op.Output.(regOut)
		keys[in.Key] = true
		switch {
		case out.Unknown:
			res.Stats["indeterminate-writes"]++
		case in.F == FRead:
			res.Stats["reads"]++
		case out.OK:
			res.Stats["ok-writes"]++
		default:
			res.Stats["refused-writes"]++
		}
	}
	res.Stats["keys"], res.Stats["ops"] = len(keys), len(pops)
	if len(pops) == 0 {
		res.Valid, res.Summary = Unknown, "no register operations completed"
		return res
	}
	timeout := opt.Timeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	verdict, info := porcupine.CheckOperationsVerbose(RegisterModel, pops, timeout)
	if opt.HTMLPath != "" {
		info.AddAnnotations(opt.Annotations)
		if err := porcupine.VisualizePath(RegisterModel, info, opt.HTMLPath); err != nil {
			res.Summary = "visualization: " + err.Error() + "; "
		}
	}
	switch verdict {
	case porcupine.Ok:
		res.Valid = Valid
		res.Summary += fmt.Sprintf("%d operations on %d codes are linearizable", len(pops), len(keys))
	case porcupine.Unknown:
		res.Valid = Unknown
		res.Summary += fmt.Sprintf("porcupine gave up after %s", timeout)
	default:
		res.Valid = Invalid
		// Name the codes whose histories are not linearizable.
		byKey := map[string][]int{}
		for i, op := range pops {
			k := op.Input.(regIn).Key
			byKey[k] = append(byKey[k], i)
		}
		var bad []string
		for k, idx := range byKey {
			part := make([]porcupine.Operation, len(idx))
			for j, i := range idx {
				part[j] = pops[i]
			}
			if porcupine.CheckOperationsTimeout(RegisterModel, part, timeout) == porcupine.Illegal {
				bad = append(bad, k)
			}
		}
		sort.Strings(bad)
		for _, k := range bad {
			a := Anomaly{Kind: "not-linearizable", Detail: "code " + k + ": no order of its operations agrees with their results and real-time order (see history.html)"}
			for _, i := range byKey[k] {
				p := src[i]
				a.Ops = append(a.Ops, p.Invoke)
				if p.Completion != nil {
					a.Ops = append(a.Ops, *p.Completion)
				}
			}
			res.add(a)
		}
		res.Summary += fmt.Sprintf("%d of %d codes are not linearizable", len(bad), len(keys))
	}
	return res
}
