package jepsen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/linkraft/linkraft/jepsen/checker"
	"github.com/linkraft/linkraft/jepsen/history"
)

// Workloads the harness knows, in the order they are listed.
var allWorkloads = []string{"register", "set", "unique-ids", "ryw", "counter"}

// runEnv is what workers share.
type runEnv struct {
	rec       *history.Recorder
	cl        *client
	nodes     []*dbNode
	urlPrefix string // this run's URLs start with it
	aliasTag  string // this run's register aliases start with it
	opsPerKey int
	perKey    int
	interval  time.Duration // mean pause between one worker's operations
	deadline  time.Time
	seed      uint64
}

// worker is one client thread; it gets a new process id after an
// indeterminate result, so a process never has two operations open.
type worker struct {
	env      *runEnv
	workload string
	process  int
	rng      *rand.Rand
}

func (e *runEnv) newWorker(workload string, n int) *worker {
	return &worker{env: e, workload: workload, process: e.rec.NewProcess(),
		rng: rand.New(rand.NewPCG(e.seed, uint64(n)<<8|uint64(len(workload))))}
}

// pace waits a random time with the configured mean, or until the deadline
// or ctx; it reports whether to go on.
func (w *worker) pace(ctx context.Context) bool {
	d := time.Duration(w.rng.Int64N(int64(2*w.env.interval) + 1))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	}
	return time.Now().Before(w.env.deadline)
}

// exec records the invocation, runs fn and records its completion. The
// request itself is not cancelled when the time limit passes (that would
// turn it into an indeterminate result); only an abort cancels it.
func (w *worker) exec(f string, n *dbNode, key, value string, fn func() result) result {
	inv := w.env.rec.Invoke(history.Op{Process: w.process, F: f, Workload: w.workload, Node: n.id, Key: key, Value: value})
	r := fn()
	w.env.rec.Complete(inv, r.typ, r.op)
	if r.typ == history.Info {
		w.process = w.env.rec.NewProcess()
	}
	return r
}

func (w *worker) node() *dbNode { return w.env.nodes[w.rng.IntN(len(w.env.nodes))] }

// runWorkloads runs every selected workload with concurrency workers each
// until the deadline.
func runWorkloads(ctx context.Context, e *runEnv, names []string, concurrency int, counterKeys []string) {
	var wg sync.WaitGroup
	for _, name := range names {
		switch name {
		case "register":
			groups := (concurrency + e.perKey - 1) / e.perKey
			for g := range groups {
				k := &keyState{env: e, group: g}
				k.rotate()
				for i := range min(e.perKey, concurrency-g*e.perKey) {
					w := e.newWorker(name, g*100+i)
					wg.Go(func() { registerWorker(ctx, w, k) })
				}
			}
		case "set", "unique-ids":
			for i := range concurrency {
				w := e.newWorker(name, i)
				wg.Go(func() { createWorker(ctx, w) })
			}
		case "ryw":
			for i := range concurrency {
				w := e.newWorker(name, i)
				wg.Go(func() { rywWorker(ctx, w) })
			}
		case "counter":
			for i := range concurrency {
				w := e.newWorker(name, i)
				wg.Go(func() { counterWorker(ctx, w, counterKeys) })
			}
		}
	}
	wg.Wait()
}

// keyState is the code a group of register workers is working on.
type keyState struct {
	env   *runEnv
	group int

	mu     sync.Mutex
	n      int
	key    string
	ops    int
	probes int // operations left on a deleted code (0: not deleted)
	count  int
	// indet counts the code's writes whose outcome is unknown.
	indet int
}

// maxIndeterminatePerKey retires a code after this many writes of unknown
// outcome. Each may take effect at any later point, so porcupine's search
// on one code grows exponentially with them (at 10 a code it can give up
// within its time limit). Jepsen's register tests bound writes per key
// alike.
const maxIndeterminatePerKey = 8

// indeterminate notes a write of unknown outcome on key.
func (k *keyState) indeterminate(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.key == key {
		k.indet++
	}
}

// tombstoneProbes is how many operations a register group still makes on a
// code after an acknowledged delete: creates (which must be refused: a
// tombstone keeps its code), reads, redirects (which must answer 410, never
// 404) and updates.
const tombstoneProbes = 12

func (k *keyState) rotate() {
	k.n++
	k.key = fmt.Sprintf("%sg%dk%d", k.env.aliasTag, k.group, k.n)
	k.ops, k.probes, k.indet = 0, 0, 0
}

// next returns the code for the next operation, a unique value to write,
// and whether the code is deleted (the operation probes its tombstone).
func (k *keyState) next() (key, value string, probe bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ops >= k.env.opsPerKey || k.probes == 1 || (k.indet >= maxIndeterminatePerKey && k.probes == 0) {
		k.rotate()
	}
	if k.probes > 1 {
		k.probes--
	}
	k.ops++
	k.count++
	return k.key, fmt.Sprintf("%s%s%s/%d", k.env.urlPrefix, checker.RegisterPath, k.key, k.count), k.probes > 0
}

// deleted notes an acknowledged delete of key: the group probes its
// tombstone for a while, then moves on.
func (k *keyState) deleted(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.key == key && k.probes == 0 {
		k.probes = tombstoneProbes + 1
	}
}

// registerWorker: create/update/delete/read on its group's current code,
// reads linearizable (?consistent=true); on a deleted code, probes of its
// tombstone, redirects among them.
func registerWorker(ctx context.Context, w *worker, k *keyState) {
	cl := w.env.cl
	for w.pace(ctx) {
		key, value, probe := k.next()
		n := w.node()
		p := w.rng.IntN(100)
		exec := func(f string, value string, fn func() result) result {
			r := w.exec(f, n, key, value, fn)
			if r.typ == history.Info && f != checker.FRead && f != checker.FResolve {
				k.indeterminate(key)
			}
			return r
		}
		switch {
		case probe && p < 35:
			exec(checker.FResolve, "", func() result { return cl.resolve(ctx, n.HTTP(), key) })
		case probe && p < 70:
			exec(checker.FCreate, value, func() result { return cl.create(ctx, n.HTTP(), value, key) })
		case probe && p < 90:
			exec(checker.FRead, "", func() result { return cl.read(ctx, n.HTTP(), key) })
		case probe:
			exec(checker.FUpdate, value, func() result { return cl.update(ctx, n.HTTP(), key, value) })
		case p < 45:
			exec(checker.FRead, "", func() result { return cl.read(ctx, n.HTTP(), key) })
		case p < 72:
			exec(checker.FUpdate, value, func() result { return cl.update(ctx, n.HTTP(), key, value) })
		case p < 96:
			exec(checker.FCreate, value, func() result { return cl.create(ctx, n.HTTP(), value, key) })
		default:
			if r := exec(checker.FDelete, "", func() result { return cl.remove(ctx, n.HTTP(), key) }); r.typ == history.OK {
				k.deleted(key)
			}
		}
	}
}

// createWorker: creates with generated codes, each with a URL of its own.
func createWorker(ctx context.Context, w *worker) {
	cl := w.env.cl
	for seq := 0; w.pace(ctx); seq++ {
		n := w.node()
		target := fmt.Sprintf("%s%s/%d-%d", w.env.urlPrefix, w.workload, w.process, seq)
		if seq%4 == 3 {
			w.execBulk(n, target, bulkLinks, func(targets []string) []result { return cl.createBulk(ctx, n.HTTP(), targets) })
			continue
		}
		w.exec(checker.FCreate, n, "", target, func() result { return cl.create(ctx, n.HTTP(), target, "") })
	}
}

// bulkLinks is how many links a bulk create of the set and unique-ids
// workloads carries (every fourth operation of theirs is one).
const bulkLinks = 4

// execBulk records k creates carried by one bulk request: each link is an
// operation of its own, on a process of its own (they are in flight
// together), invoked before the request and completed from its own result.
// The checkers then hold bulk creates to what they hold single ones to.
func (w *worker) execBulk(n *dbNode, prefix string, k int, fn func(targets []string) []result) {
	targets := make([]string, k)
	invs := make([]history.Op, k)
	for i := range targets {
		targets[i] = fmt.Sprintf("%s.b%d", prefix, i)
		invs[i] = w.env.rec.Invoke(history.Op{Process: w.env.rec.NewProcess(), F: checker.FCreate, Workload: w.workload,
			Node: n.id, Value: targets[i]})
	}
	for i, r := range fn(targets) {
		w.env.rec.Complete(invs[i], r.typ, r.op)
	}
}

// rywWorker: create on node i, then at once resolve on node j != i.
func rywWorker(ctx context.Context, w *worker) {
	cl := w.env.cl
	for seq := 0; w.pace(ctx); seq++ {
		i := w.rng.IntN(len(w.env.nodes))
		n := w.env.nodes[i]
		target := fmt.Sprintf("%sryw/%d-%d", w.env.urlPrefix, w.process, seq)
		r := w.exec(checker.FCreate, n, "", target, func() result { return cl.create(ctx, n.HTTP(), target, "") })
		if r.typ != history.OK || len(w.env.nodes) < 2 {
			continue
		}
		j := (i + 1 + w.rng.IntN(len(w.env.nodes)-1)) % len(w.env.nodes)
		m, code := w.env.nodes[j], r.op.Key
		w.exec(checker.FResolve, m, code, "", func() result { return cl.resolve(ctx, m.HTTP(), code) })
	}
}

// parseWorkloads expands a -workload value ("all" or a comma list).
func parseWorkloads(s string) ([]string, error) {
	if s == "" || s == "all" {
		return slices.Clone(allWorkloads), nil
	}
	var out []string
	for _, w := range strings.Split(s, ",") {
		w = strings.TrimSpace(w)
		if !slices.Contains(allWorkloads, w) {
			return nil, fmt.Errorf("unknown workload %q (have %s)", w, strings.Join(allWorkloads, ", "))
		}
		if !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out, nil
}
