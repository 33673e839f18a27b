package jepsen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/linkraft/linkraft/jepsen/history"
	"github.com/linkraft/linkraft/jepsen/netns"
)

// A fault is one kind of trouble: start breaks something and returns what
// it did and how to undo it.
type fault struct {
	name  string
	start func(ctx context.Context, n *nemesis) (detail string, heal func(context.Context) error, err error)
}

// nemesis injects faults on a schedule (Jepsen's flip-flop: wait, start,
// wait, heal) and records each start and heal in the history.
type nemesis struct {
	env      *netns.Env
	db       *db
	cl       *client
	rec      *history.Recorder
	faults   []fault
	interval time.Duration
	rng      *rand.Rand
	lossPct  int

	mu      sync.Mutex
	healing func(context.Context) error // undo of the fault in force
	counts  map[string]int
}

// faultNames lists every fault, and the groups a -nemesis value may name.
var (
	partitionFaults = []string{"partition-halves", "partition-random-halves", "partition-one", "partition-majorities-ring", "partition-bridge", "partition-leader"}
	killFaults      = []string{"kill-one", "kill-minority", "kill-majority", "kill-all", "kill-leader"}
	pauseFaults     = []string{"pause-one", "pause-minority", "pause-leader"}
	lossFaults      = []string{"loss"}
	faultGroups     = map[string][]string{
		"partition": partitionFaults, "kill": killFaults, "pause": pauseFaults, "loss": lossFaults,
		"all": slices.Concat(partitionFaults, killFaults, pauseFaults, lossFaults),
	}
)

// parseNemesis expands a -nemesis value ("none", groups, single faults).
func parseNemesis(s string) ([]string, error) {
	if s == "" || s == "none" {
		return nil, nil
	}
	all := faultGroups["all"]
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		names, ok := faultGroups[f]
		if !ok {
			if !slices.Contains(all, f) {
				return nil, fmt.Errorf("unknown nemesis %q (groups: partition, kill, pause, loss, all, none; faults: %s)", f, strings.Join(all, ", "))
			}
			names = []string{f}
		}
		for _, n := range names {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out, nil
}

func (n *nemesis) indexes() []int {
	out := make([]int, len(n.db.nodes))
	for i := range out {
		out[i] = i
	}
	return out
}

func (n *nemesis) shuffled() []int {
	ix := n.indexes()
	n.rng.Shuffle(len(ix), func(i, j int) { ix[i], ix[j] = ix[j], ix[i] })
	return ix
}

func (n *nemesis) names(ix []int) string {
	var s []string
	for _, i := range ix {
		s = append(s, n.db.nodes[i].id)
	}
	return strings.Join(s, " ")
}

// leader is the node that leads the most shards, by the nodes' own
// reports; ties and silence fall to a random node.
func (n *nemesis) leader(ctx context.Context) int {
	best, bestN := n.rng.IntN(len(n.db.nodes)), -1
	for _, i := range n.shuffled() {
		st, err := n.cl.status(ctx, n.db.nodes[i].HTTP())
		if err != nil {
			continue
		}
		led := 0
		for _, s := range st.Shards {
			if s.State == "Leader" {
				led++
			}
		}
		if led > bestN {
			best, bestN = i, led
		}
	}
	return best
}

// cut partitions the nodes into components: no traffic between nodes of
// different components (both ways).
func (n *nemesis) cut(ctx context.Context, components ...[]int) (string, func(context.Context) error, error) {
	comp := map[int]int{}
	for c, ix := range components {
		for _, i := range ix {
			comp[i] = c
		}
	}
	grudge := map[int][]int{}
	for a := range n.db.nodes {
		for b := range n.db.nodes {
			ca, okA := comp[a]
			cb, okB := comp[b]
			if okA && okB && ca != cb {
				grudge[a] = append(grudge[a], b)
			}
		}
	}
	var parts []string
	for _, c := range components {
		parts = append(parts, "["+n.names(c)+"]")
	}
	return n.grudge(ctx, strings.Join(parts, " | "), grudge)
}

func (n *nemesis) grudge(ctx context.Context, detail string, g map[int][]int) (string, func(context.Context) error, error) {
	if err := n.env.Partition(ctx, g); err != nil {
		return "", nil, err
	}
	return detail, n.env.Heal, nil
}

func (n *nemesis) kill(ctx context.Context, ix []int) (string, func(context.Context) error, error) {
	for _, i := range ix {
		if err := n.db.kill(n.db.nodes[i]); err != nil {
			return "", nil, err
		}
	}
	return "SIGKILL " + n.names(ix), func(context.Context) error {
		var first error
		for _, i := range ix {
			if err := n.db.start(n.db.nodes[i]); err != nil && first == nil {
				first = err
			}
		}
		return first
	}, nil
}

func (n *nemesis) pause(ctx context.Context, ix []int) (string, func(context.Context) error, error) {
	for _, i := range ix {
		if err := n.db.pause(n.db.nodes[i]); err != nil {
			return "", nil, err
		}
	}
	return "SIGSTOP " + n.names(ix), func(context.Context) error {
		var first error
		for _, i := range ix {
			if err := n.db.resume(n.db.nodes[i]); err != nil && first == nil {
				first = err
			}
		}
		return first
	}, nil
}

// buildFaults turns names into faults.
func (n *nemesis) buildFaults(names []string) {
	size := len(n.db.nodes)
	minority, majority := (size-1)/2, size/2+1
	for _, name := range names {
		var start func(ctx context.Context, n *nemesis) (string, func(context.Context) error, error)
		switch name {
		case "partition-halves":
			start = func(ctx context.Context, n *nemesis) (string, func(context.Context) error, error) {
				ix := n.indexes()
				return n.cut(ctx, ix[:size/2], ix[size/2:])
			}
		case "partition-random-halves":
			start = func(ctx context.Context, n *nemesis) (string, func(context.Context) error, error) {
				ix := n.shuffled()
				return n.cut(ctx, ix[:size/2], ix[size/2:])
			}
		case "partition-one":
			start = func(ctx context.Context, n *nemesis) (string, func(context.Context) error, error) {
				ix := n.shuffled()
				return n.cut(ctx, ix[:1], ix[1:])
			}
		case "partition-leader":
			start = func(ctx context.Context, n *nemesis) (string, func(context.Context) error, error) {
				l := n.leader(ctx)
				var rest []int
				for i := range size {
					if i != l {
						rest = append(rest, i)
					}
				}
				d, h, err := n.cut(ctx, []int{l}, rest)
				return "leader " + d, h, err
			}
		case "partition-majorities-ring":
			// Each node sees a window of a majority of its ring
			// neighbours, and every node a different one (Jepsen's
			// majorities-ring).
			start = func(ctx context.Context, n *nemesis) (string, func(context.Context) error, error) {
				ring := n.shuffled()
				pos := map[int]int{}
				for p, i := range ring {
					pos[i] = p
				}
				// Node a hears b when b is at most lo places behind or hi
				// places ahead of it on the ring: lo+hi+1 = a majority.
				lo := (majority - 1) / 2
				hi := majority - 1 - lo
				g := map[int][]int{}
				var desc []string
				for _, a := range ring {
					var sees []int
					for _, b := range ring {
						fd := (pos[b] - pos[a] + size) % size
						if fd <= hi || size-fd <= lo {
							sees = append(sees, b)
						} else {
							g[a] = append(g[a], b)
						}
					}
					sort.Ints(sees)
					desc = append(desc, n.db.nodes[a].id+" hears ["+n.names(sees)+"]")
				}
				return n.grudge(ctx, strings.Join(desc, "; "), g)
			}
		case "partition-bridge":
			// Two halves that cannot talk, and one node that talks to both.
			start = func(ctx context.Context, n *nemesis) (string, func(context.Context) error, error) {
				ix := n.shuffled()
				bridge, a, b := ix[0], ix[1:1+(size-1)/2], ix[1+(size-1)/2:]
				g := map[int][]int{}
				for _, x := range a {
					g[x] = append(g[x], b...)
				}
				for _, y := range b {
					g[y] = append(g[y], a...)
				}
				return n.grudge(ctx, fmt.Sprintf("[%s] | [%s] bridged by %s", n.names(a), n.names(b), n.db.nodes[bridge].id), g)
			}
		case "kill-one":
			start = func(ctx context.Context, n *nemesis) (string, func(context.Context) error, error) {
				return n.kill(ctx, n.shuffled()[:1])
			}
		case "kill-minority":
			start = func(ctx context.Context, n *nemesis) (string, func(context.Context) error, error) {
				return n.kill(ctx, n.shuffled()[:max(minority, 1)])
			}
		case "kill-majority":
			start = func(ctx context.Context, n *nemesis) (string, func(context.Context) error, error) {
				return n.kill(ctx, n.shuffled()[:majority])
			}
		case "kill-all":
			start = func(ctx context.Context, n *nemesis) (string, func(context.Context) error, error) {
				return n.kill(ctx, n.indexes())
			}
		case "kill-leader":
			start = func(ctx context.Context, n *nemesis) (string, func(context.Context) error, error) {
				return n.kill(ctx, []int{n.leader(ctx)})
			}
		case "pause-one":
			start = func(ctx context.Context, n *nemesis) (string, func(context.Context) error, error) {
				return n.pause(ctx, n.shuffled()[:1])
			}
		case "pause-minority":
			start = func(ctx context.Context, n *nemesis) (string, func(context.Context) error, error) {
				return n.pause(ctx, n.shuffled()[:max(minority, 1)])
			}
		case "pause-leader":
			start = func(ctx context.Context, n *nemesis) (string, func(context.Context) error, error) {
				return n.pause(ctx, []int{n.leader(ctx)})
			}
		case "loss":
			start = func(ctx context.Context, n *nemesis) (string, func(context.Context) error, error) {
				if err := n.env.Loss(ctx, n.indexes(), n.lossPct); err != nil {
					return "", nil, err
				}
				return fmt.Sprintf("drop %d%% of packets between all nodes", n.lossPct), n.env.Heal, nil
			}
		}
		n.faults = append(n.faults, fault{name: name, start: start})
	}
}

// run injects faults until the deadline or ctx ends, then heals whatever
// is in force. Errors of the nemesis itself end the run.
func (n *nemesis) run(ctx context.Context, deadline time.Time) error {
	if len(n.faults) == 0 {
		return nil
	}
	wait := func() bool {
		d := min(n.interval, time.Until(deadline))
		if d <= 0 {
			return false
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return time.Now().Before(deadline)
		}
	}
	for wait() {
		f := n.faults[n.rng.IntN(len(n.faults))]
		inv := n.rec.Invoke(history.Op{Process: history.NemesisProcess, F: "start", Workload: f.name})
		detail, heal, err := f.start(ctx, n)
		if err != nil {
			n.rec.Complete(inv, history.Info, history.Op{Error: err.Error()})
			return fmt.Errorf("nemesis %s: %w", f.name, err)
		}
		n.rec.Complete(inv, history.OK, history.Op{Value: detail})
		n.mu.Lock()
		n.healing = heal
		n.counts[f.name]++
		n.mu.Unlock()
		wait()
		if err := n.heal(context.WithoutCancel(ctx), f.name); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// heal undoes the fault in force, if any, and records it.
func (n *nemesis) heal(ctx context.Context, name string) error {
	n.mu.Lock()
	h := n.healing
	n.healing = nil
	n.mu.Unlock()
	if h == nil {
		return nil
	}
	inv := n.rec.Invoke(history.Op{Process: history.NemesisProcess, F: "stop", Workload: name})
	if err := h(ctx); err != nil {
		n.rec.Complete(inv, history.Info, history.Op{Error: err.Error()})
		return fmt.Errorf("heal %s: %w", name, err)
	}
	n.rec.Complete(inv, history.OK, history.Op{})
	return nil
}
