package jepsen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/linkraft/linkraft/jepsen/checker"
	"github.com/linkraft/linkraft/jepsen/history"
	"github.com/linkraft/linkraft/jepsen/netns"
)

// A fault is one kind of trouble: start breaks something and returns what
// it did, the evidence that it took effect, and how to undo it.
type fault struct {
	name  string
	start func(ctx context.Context, n *nemesis) (*injection, error)
}

// injection is a fault in force.
type injection struct {
	detail string
	// effect and effective are known at start for processes (a kill, a
	// pause), and read before the heal for the network (drop counters).
	effect    string
	effective bool
	measure   func(context.Context) (string, bool, error)
	// breach, for the hostile fault, reports that an attack got an
	// answer: the trust boundary failed.
	breach func() bool
	heal   func(context.Context) error
	// after, if set, reads the evidence once the heal is done (what a
	// fault causes only then, as a snapshot install).
	after func(context.Context) (string, bool, error)
}

// errNoTarget is returned by a fault that cannot find its target (no node
// reports leading a shard): nothing was injected.
var errNoTarget = errors.New("no target")

// nemesis injects faults on a schedule (Jepsen's flip-flop: wait, start,
// wait, heal) and records each start and heal in the history, and what each
// fault is shown to have done.
type nemesis struct {
	env      *netns.Env
	db       *db
	cl       *client
	rec      *history.Recorder
	faults   []fault
	interval time.Duration
	rng      *rand.Rand
	lossPct  int
	// crashNext is crash-point's next point (crashCycle).
	crashNext int
	// first are the faults to inject before the random draws.
	first []fault

	// The flood's link and key, made at its first injection.
	floodOnce sync.Once
	floodCode string
	floodKey  string
	floodErr  error

	mu      sync.Mutex
	current *injection // the fault in force
	record  *checker.FaultRecord
	records []checker.FaultRecord
}

// faultNames lists every fault, and the groups a -nemesis value may name.
var (
	partitionFaults = []string{"partition-halves", "partition-random-halves", "partition-one", "partition-majorities-ring", "partition-bridge", "partition-leader"}
	killFaults      = []string{"kill-one", "kill-minority", "kill-majority", "kill-all", "kill-leader"}
	pauseFaults     = []string{"pause-one", "pause-minority", "pause-leader"}
	lossFaults      = []string{"loss"}
	hostileFaults   = []string{"hostile"}
	floodFaults     = []string{"flood"}
	diskFaults      = []string{"disk-full"}
	faultGroups     = map[string][]string{
		"partition": partitionFaults, "kill": killFaults, "pause": pauseFaults, "loss": lossFaults, "hostile": hostileFaults, "flood": floodFaults,
		"disk": diskFaults, "membership": membershipFaults, "restart": restartFaults, "meta": metaFaults, "composed": composedFaults,
		"snapshot": snapshotFaults, "power": powerFaults, "crash": crashFaults,
		// power-loss is not in all: it puts every data dir on lazyfs, and
		// disk-full puts one on a tmpfs of its own. Nor are the crash
		// faults: they need a jepsencrash build, and all (the default)
		// tests the binary as shipped.
		"all": slices.Concat(partitionFaults, killFaults, pauseFaults, lossFaults, hostileFaults, floodFaults, diskFaults,
			membershipFaults, restartFaults, metaFaults, composedFaults, snapshotFaults),
	}
)

// parseNemesis expands a -nemesis value ("none", groups, single faults).
func parseNemesis(s string) ([]string, error) {
	if s == "" || s == "none" {
		return nil, nil
	}
	all := slices.Concat(faultGroups["all"], powerFaults, crashFaults)
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		names, ok := faultGroups[f]
		if !ok {
			if !slices.Contains(all, f) {
				return nil, fmt.Errorf("unknown nemesis %q (groups: partition, kill, pause, loss, hostile, flood, disk, membership, restart, meta, composed, snapshot, power, crash, all, none; faults: %s)", f, strings.Join(all, ", "))
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

// leader is the node that leads the most shards, from the cluster view:
// every node's /admin/v1/cluster, each counting the shards it says it leads
// itself (ties to the lower index). errNoTarget if no node answers or none
// leads a shard: a "leader" fault then injects nothing rather than
// falling back to some other node.
func (n *nemesis) leader(ctx context.Context) (int, error) {
	best, bestN := -1, 0
	var silent []string
	for i, node := range n.db.nodes {
		st, err := n.cl.status(ctx, node.Admin())
		if err != nil {
			silent = append(silent, node.id)
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
	if best < 0 {
		return 0, fmt.Errorf("%w: no node reports leading a shard (no answer from %v)", errNoTarget, silent)
	}
	return best, nil
}

// cut partitions the nodes into components: no traffic between nodes of
// different components (both ways).
func (n *nemesis) cut(ctx context.Context, components ...[]int) (*injection, error) {
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

func (n *nemesis) grudge(ctx context.Context, detail string, g map[int][]int) (*injection, error) {
	if err := n.env.Partition(ctx, g); err != nil {
		return nil, err
	}
	return &injection{detail: detail, measure: n.dropped, heal: n.env.Heal}, nil
}

// dropped is the evidence of a network fault: the packets its rules
// dropped, read before the heal resets them.
func (n *nemesis) dropped(ctx context.Context) (string, bool, error) {
	cut, thin, err := n.env.Dropped(ctx)
	if err != nil {
		return "", false, err
	}
	return fmt.Sprintf("dropped %d packets", cut+thin), cut+thin > 0, nil
}

// kill sends SIGKILL to the nodes ix; the heal restarts them (a restart
// that fails is on record for the nodes checker, and the final phase tries
// again).
func (n *nemesis) kill(_ context.Context, ix []int) (*injection, error) {
	return n.onTargets("SIGKILL", ix, n.db.kill, func(t *dbNode) error {
		_ = n.db.start(t)
		return nil
	})
}

// pause stops the nodes ix with SIGSTOP and checks that they stopped; the
// heal resumes them.
func (n *nemesis) pause(_ context.Context, ix []int) (*injection, error) {
	return n.onTargets("SIGSTOP", ix, n.db.pause, n.db.resume)
}

// onTargets does a process fault to each of the nodes ix and undoes it at
// the heal. A target that is not running is an error of the fault (the
// nodes checker reports how it died); the others are hit anyway. The fault
// is effective if every node hit shows the effect.
func (n *nemesis) onTargets(what string, ix []int, do func(*dbNode) (string, bool, error), undo func(*dbNode) error) (*injection, error) {
	inj := &injection{detail: what + " " + n.names(ix), effective: true}
	var effects []string
	var errs []error
	var hit []*dbNode
	for _, i := range ix {
		t := n.db.nodes[i]
		effect, ok, err := do(t)
		if errors.Is(err, errNotRunning) {
			errs = append(errs, err)
			continue
		} else if err != nil {
			return nil, err
		}
		hit = append(hit, t)
		effects = append(effects, effect)
		inj.effective = inj.effective && ok
	}
	if len(hit) == 0 {
		return nil, errors.Join(errs...)
	}
	inj.effect = strings.Join(effects, "; ")
	inj.heal = func(context.Context) error {
		var first error
		for _, t := range hit {
			if err := undo(t); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	return inj, errors.Join(errs...)
}

// others is every node index but i.
func (n *nemesis) others(i int) []int {
	var rest []int
	for j := range n.db.nodes {
		if j != i {
			rest = append(rest, j)
		}
	}
	return rest
}

// startFunc starts a fault.
type startFunc = func(ctx context.Context, n *nemesis) (*injection, error)

// buildFaults turns names into faults.
func (n *nemesis) buildFaults(names []string) {
	size := len(n.db.nodes)
	minority, majority := (size-1)/2, size/2+1
	for _, name := range names {
		var start startFunc
		switch name {
		case "hostile":
			start = func(ctx context.Context, n *nemesis) (*injection, error) { return n.startHostile(ctx) }
		case "flood":
			start = func(ctx context.Context, n *nemesis) (*injection, error) { return n.startFlood(ctx) }
		case "disk-full":
			start = func(ctx context.Context, n *nemesis) (*injection, error) { return n.fillDisk(ctx) }
		case "power-loss":
			start = func(ctx context.Context, n *nemesis) (*injection, error) { return n.powerLoss(ctx) }
		case "crash-point":
			start = func(ctx context.Context, n *nemesis) (*injection, error) { return n.crashPoint(ctx) }
		case "crash-install":
			start = func(ctx context.Context, n *nemesis) (*injection, error) { return n.crashInstall(ctx) }
		case "partition-halves":
			start = func(ctx context.Context, n *nemesis) (*injection, error) {
				ix := n.indexes()
				return n.cut(ctx, ix[:size/2], ix[size/2:])
			}
		case "partition-random-halves":
			start = func(ctx context.Context, n *nemesis) (*injection, error) {
				ix := n.shuffled()
				return n.cut(ctx, ix[:size/2], ix[size/2:])
			}
		case "partition-one":
			start = func(ctx context.Context, n *nemesis) (*injection, error) {
				ix := n.shuffled()
				return n.cut(ctx, ix[:1], ix[1:])
			}
		case "partition-leader":
			start = func(ctx context.Context, n *nemesis) (*injection, error) { return n.cutOff(ctx, "leader", n.leader) }
		case "partition-majorities-ring":
			start = func(ctx context.Context, n *nemesis) (*injection, error) { return n.majoritiesRing(ctx, majority) }
		case "partition-bridge":
			start = func(ctx context.Context, n *nemesis) (*injection, error) { return n.bridge(ctx) }
		case "kill-one":
			start = func(ctx context.Context, n *nemesis) (*injection, error) { return n.kill(ctx, n.shuffled()[:1]) }
		case "kill-minority":
			start = func(ctx context.Context, n *nemesis) (*injection, error) {
				return n.kill(ctx, n.shuffled()[:max(minority, 1)])
			}
		case "kill-majority":
			start = func(ctx context.Context, n *nemesis) (*injection, error) { return n.kill(ctx, n.shuffled()[:majority]) }
		case "kill-all":
			start = func(ctx context.Context, n *nemesis) (*injection, error) { return n.kill(ctx, n.indexes()) }
		case "kill-leader":
			start = func(ctx context.Context, n *nemesis) (*injection, error) {
				l, err := n.leader(ctx)
				if err != nil {
					return nil, err
				}
				return n.kill(ctx, []int{l})
			}
		case "pause-one":
			start = func(ctx context.Context, n *nemesis) (*injection, error) { return n.pause(ctx, n.shuffled()[:1]) }
		case "pause-minority":
			start = func(ctx context.Context, n *nemesis) (*injection, error) {
				return n.pause(ctx, n.shuffled()[:max(minority, 1)])
			}
		case "pause-leader":
			start = func(ctx context.Context, n *nemesis) (*injection, error) {
				l, err := n.leader(ctx)
				if err != nil {
					return nil, err
				}
				return n.pause(ctx, []int{l})
			}
		case "membership":
			start = func(ctx context.Context, n *nemesis) (*injection, error) { return n.membership(ctx) }
		case "replace-node":
			start = func(ctx context.Context, n *nemesis) (*injection, error) { return n.replaceNode(ctx) }
		case "rolling-restart":
			start = func(ctx context.Context, n *nemesis) (*injection, error) { return n.rollingRestart(ctx) }
		case "partition-meta-leader":
			start = func(ctx context.Context, n *nemesis) (*injection, error) {
				return n.cutOff(ctx, "meta leader", n.metaLeader)
			}
		case "kill-meta-leader":
			start = func(ctx context.Context, n *nemesis) (*injection, error) {
				l, err := n.metaLeader(ctx)
				if err != nil {
					return nil, err
				}
				return n.kill(ctx, []int{l})
			}
		case "snapshot-install":
			start = func(ctx context.Context, n *nemesis) (*injection, error) { return n.snapshotInstall(ctx) }
		case "partition-then-kill-leader":
			start = func(ctx context.Context, n *nemesis) (*injection, error) { return n.partitionThenKillLeader(ctx) }
		case "loss":
			start = func(ctx context.Context, n *nemesis) (*injection, error) {
				if err := n.env.Loss(ctx, n.indexes(), n.lossPct); err != nil {
					return nil, err
				}
				return &injection{detail: fmt.Sprintf("drop %d%% of packets between all nodes", n.lossPct),
					measure: n.dropped, heal: n.env.Heal}, nil
			}
		}
		n.faults = append(n.faults, fault{name: name, start: start})
	}
}

// cutOff partitions the node find names (a leader) from the others; what
// it is prefixes the detail.
func (n *nemesis) cutOff(ctx context.Context, what string, find func(context.Context) (int, error)) (*injection, error) {
	l, err := find(ctx)
	if err != nil {
		return nil, err
	}
	inj, err := n.cut(ctx, []int{l}, n.others(l))
	if inj != nil {
		inj.detail = what + " " + inj.detail
	}
	return inj, err
}

// majoritiesRing is Jepsen's majorities-ring: each node sees a window of
// a majority of its ring neighbours, and every node a different one.
func (n *nemesis) majoritiesRing(ctx context.Context, majority int) (*injection, error) {
	size := len(n.db.nodes)
	ring := n.shuffled()
	pos := map[int]int{}
	for p, i := range ring {
		pos[i] = p
	}
	// Node a hears b when b is at most lo places behind or hi places ahead
	// of it on the ring: lo+hi+1 = a majority.
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

// bridge is two halves that cannot talk, and one node that talks to both.
func (n *nemesis) bridge(ctx context.Context) (*injection, error) {
	size := len(n.db.nodes)
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

// run injects faults until the deadline or ctx ends, then heals whatever
// is in force. A fault that finds no target or aims at a node that is not
// running is recorded as such and the schedule goes on; other errors of the
// nemesis itself (nft failing) end the run.
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
		if len(n.first) > 0 {
			f, n.first = n.first[0], n.first[1:]
		}
		if err := n.inject(ctx, f); err != nil {
			return err
		}
		wait()
		if err := n.heal(context.WithoutCancel(ctx)); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// inject starts f and records it: in the history (start, ok with the
// detail, or fail with why nothing was injected) and in the fault records.
func (n *nemesis) inject(ctx context.Context, f fault) error {
	inv := n.rec.Invoke(history.Op{Process: history.NemesisProcess, F: "start", Workload: f.name})
	rec := checker.FaultRecord{Fault: f.name, Start: seconds(inv.Time)}
	inj, err := f.start(ctx, n)
	if err != nil {
		rec.Error = err.Error()
		rec.NoTarget = errors.Is(err, errNoTarget)
	}
	if inj == nil {
		n.rec.Complete(inv, history.Fail, history.Op{Error: rec.Error})
		n.mu.Lock()
		n.records = append(n.records, rec)
		n.mu.Unlock()
		if rec.NoTarget || errors.Is(err, errNotRunning) {
			return nil
		}
		return fmt.Errorf("nemesis %s: %w", f.name, err)
	}
	rec.Injected, rec.Detail, rec.Effect, rec.Effective = true, inj.detail, inj.effect, inj.effective
	n.rec.Complete(inv, history.OK, history.Op{Value: inj.detail, Error: rec.Error})
	n.mu.Lock()
	n.current, n.record = inj, &rec
	n.mu.Unlock()
	return nil
}

// heal undoes the fault in force, if any, records the evidence of its
// effect, and records the heal.
func (n *nemesis) heal(ctx context.Context) error {
	n.mu.Lock()
	inj, rec := n.current, n.record
	n.current, n.record = nil, nil
	n.mu.Unlock()
	if inj == nil {
		return nil
	}
	if inj.measure != nil {
		effect, ok, err := inj.measure(ctx)
		if err != nil {
			effect = "unmeasured: " + err.Error()
		}
		rec.Effect, rec.Effective = effect, ok
	}
	if inj.breach != nil {
		rec.Breach = inj.breach()
	}
	inv := n.rec.Invoke(history.Op{Process: history.NemesisProcess, F: "stop", Workload: rec.Fault})
	err := inj.heal(ctx)
	if err == nil && inj.after != nil {
		effect, ok, aerr := inj.after(ctx)
		if aerr != nil {
			effect = "unmeasured: " + aerr.Error()
		}
		rec.Effect, rec.Effective = effect, ok
	}
	rec.End = seconds(n.rec.Now())
	n.mu.Lock()
	n.records = append(n.records, *rec)
	n.mu.Unlock()
	if err != nil {
		n.rec.Complete(inv, history.Info, history.Op{Error: err.Error()})
		return fmt.Errorf("heal %s: %w", rec.Fault, err)
	}
	n.rec.Complete(inv, history.OK, history.Op{Value: rec.Effect})
	return nil
}

// faultRecords returns what the nemesis tried so far.
func (n *nemesis) faultRecords() []checker.FaultRecord {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.records)
}

func seconds(ns int64) float64 { return float64(ns) / 1e9 }

// putFirst queues the comma-separated faults of list (each one of the
// run's) to be injected first, in order.
func (n *nemesis) putFirst(list string) error {
	for name := range strings.SplitSeq(list, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		i := slices.IndexFunc(n.faults, func(f fault) bool { return f.name == name })
		if i < 0 {
			return fmt.Errorf("-nemesis-first %s: not a fault of this run's -nemesis", name)
		}
		n.first = append(n.first, n.faults[i])
	}
	return nil
}
