package jepsen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/linkraft/linkraft/jepsen/checker"
	"github.com/linkraft/linkraft/jepsen/history"
	"github.com/linkraft/linkraft/jepsen/netns"
	"github.com/linkraft/linkraft/jepsen/report"
)

// Options configure one test run.
type Options struct {
	// Name names the test in the store (default "linkraft").
	Name string
	// Nodes is the cluster size (default 5).
	Nodes int
	// BootstrapExpect is the nodes' -bootstrap-expect (default Nodes).
	// Fewer than Nodes, with StartJitter, is the formation run: more new
	// nodes start than form the cluster.
	BootstrapExpect int
	// StartJitter starts the nodes in a random order, each after a random
	// delay below it (default 0: in order, one after another).
	StartJitter time.Duration
	// TimeLimit is how long the workloads run (default 60 s).
	TimeLimit time.Duration
	// Concurrency is the number of client workers per workload (default 2
	// per node).
	Concurrency int
	// Rate is the target of operations per second over all workloads
	// (default 200).
	Rate float64
	// Nemesis is the list of faults ("partition,kill,pause", "none", ...).
	Nemesis string
	// NemesisInterval is the time between faults and each fault's length
	// (default 10 s).
	NemesisInterval time.Duration
	// Workloads is the list of workloads (default "all").
	Workloads string
	// Store is the results folder (default "store").
	Store string
	// OpsPerKey bounds register operations per code (default 200).
	OpsPerKey int
	// PerKey is the number of register workers sharing one code (default
	// 5, at most 10).
	PerKey int
	// OpTimeout bounds each client request (default 3 s).
	OpTimeout time.Duration
	// RecoveryTimeout bounds the wait for the healed cluster (default 90 s).
	RecoveryTimeout time.Duration
	// LossPercent is the loss fault's drop rate (default 30).
	LossPercent int
	// Seed makes the schedule and the operation mix repeatable (default:
	// from the clock).
	Seed uint64
	// Binary is a linknode binary to run; empty builds one (with
	// BuildTags) into the run folder.
	Binary string
	// BuildTags are passed to go build (for example "jepsenbugs").
	BuildTags string
	// Race builds linknode with the race detector (reports fail the run).
	Race bool
	// Bugs turns on deliberate faults (needs BuildTags "jepsenbugs").
	Bugs []string
	// NodeArgs are extra linknode flags.
	NodeArgs []string
	// Prefix names the network namespaces and interfaces (default "lkj").
	Prefix string
	// Subnet is the private /24 of the test network (default
	// 10.77.0.0/24); concurrent runs need different prefixes and subnets.
	Subnet netip.Prefix
	// KeepData keeps the nodes' data folders even when the run is valid.
	KeepData bool
	// Log receives progress lines (default os.Stderr).
	Log io.Writer
}

// Outcome is a finished run.
type Outcome struct {
	Dir     string           `json:"dir"`
	Valid   checker.Validity `json:"valid"`
	Results []checker.Result `json:"results"`
	// Faults are the faults tried, by kind, with what shows they took
	// effect; FaultLog is every one of them in order.
	Faults   map[string]checker.FaultSummary `json:"faults"`
	FaultLog []checker.FaultRecord           `json:"fault_log"`
	// Nodes is every start of every node's process and how it ended.
	Nodes []checker.NodeRun `json:"nodes"`
	Ops   int               `json:"ops"`
}

// ErrBadOptions marks invalid options (exit code 254).
var ErrBadOptions = errors.New("bad options")

func (o *Options) defaults() error {
	if o.Name == "" {
		o.Name = "linkraft"
	}
	if o.Nodes == 0 {
		o.Nodes = 5
	}
	if o.TimeLimit == 0 {
		o.TimeLimit = time.Minute
	}
	if o.Concurrency == 0 {
		o.Concurrency = 2 * o.Nodes
	}
	if o.Rate == 0 {
		o.Rate = 200
	}
	if o.NemesisInterval == 0 {
		o.NemesisInterval = 10 * time.Second
	}
	if o.Store == "" {
		o.Store = "store"
	}
	if o.OpsPerKey == 0 {
		o.OpsPerKey = 200
	}
	if o.PerKey == 0 {
		o.PerKey = 5
	}
	if o.OpTimeout == 0 {
		o.OpTimeout = 3 * time.Second
	}
	if o.RecoveryTimeout == 0 {
		o.RecoveryTimeout = 90 * time.Second
	}
	if o.LossPercent == 0 {
		o.LossPercent = 30
	}
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
	if o.Log == nil {
		o.Log = os.Stderr
	}
	if o.BootstrapExpect == 0 {
		o.BootstrapExpect = o.Nodes
	}
	switch {
	case o.Nodes < 1 || o.Nodes > 9:
		return fmt.Errorf("%w: -nodes %d: want 1 to 9", ErrBadOptions, o.Nodes)
	case o.BootstrapExpect < 1 || o.BootstrapExpect > o.Nodes:
		return fmt.Errorf("%w: -bootstrap-expect %d: want 1 to -nodes", ErrBadOptions, o.BootstrapExpect)
	case o.StartJitter < 0:
		return fmt.Errorf("%w: -start-jitter %s: want 0 or more", ErrBadOptions, o.StartJitter)
	case o.TimeLimit < time.Second:
		return fmt.Errorf("%w: -time-limit %s: want at least 1s", ErrBadOptions, o.TimeLimit)
	case o.Concurrency < 1 || o.Concurrency > 200:
		return fmt.Errorf("%w: -concurrency %d: want 1 to 200", ErrBadOptions, o.Concurrency)
	case o.Rate <= 0 || o.Rate > 10000:
		return fmt.Errorf("%w: -rate %g: want (0, 10000]", ErrBadOptions, o.Rate)
	case o.NemesisInterval < 100*time.Millisecond:
		return fmt.Errorf("%w: -nemesis-interval %s: want at least 100ms", ErrBadOptions, o.NemesisInterval)
	case o.PerKey < 1 || o.PerKey > 10:
		return fmt.Errorf("%w: -per-key %d: porcupine needs 1 to 10 clients per code", ErrBadOptions, o.PerKey)
	case o.LossPercent < 1 || o.LossPercent > 100:
		return fmt.Errorf("%w: -loss %d: want 1 to 100", ErrBadOptions, o.LossPercent)
	}
	for _, a := range o.NodeArgs {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && slices.Contains(harnessFlags, name) {
			return fmt.Errorf("%w: -node-args %s: the harness sets -%s itself (its checkers depend on the value)", ErrBadOptions, a, name)
		}
	}
	return nil
}

func (o *Options) logf(format string, args ...any) {
	fmt.Fprintf(o.Log, "%s  %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// Run runs one test and checks it. A returned error is a harness failure
// (the verdict is then meaningless); anomalies are in the Outcome.
func Run(ctx context.Context, opt Options) (out *Outcome, err error) {
	if err := opt.defaults(); err != nil {
		return nil, err
	}
	workloads, err := parseWorkloads(opt.Workloads)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadOptions, err)
	}
	faults, err := parseNemesis(opt.Nemesis)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadOptions, err)
	}
	env, err := netns.New(netns.Config{Prefix: opt.Prefix, Nodes: opt.Nodes, Subnet: opt.Subnet})
	if err != nil {
		return nil, err
	}
	dir, err := newRunDir(opt.Store, opt.Name)
	if err != nil {
		return nil, err
	}
	out = &Outcome{Dir: dir, Valid: checker.Unknown}
	opt.logf("run folder %s (seed %d)", dir, opt.Seed)
	if err := writeJSON(filepath.Join(dir, "test.json"), testRecord(opt, workloads, faults)); err != nil {
		return out, err
	}

	bin := opt.Binary
	if bin == "" {
		bin = filepath.Join(dir, "linknode")
		opt.logf("building linknode (tags %q, race %v)", opt.BuildTags, opt.Race)
		if err := buildLinknode(ctx, bin, opt.BuildTags, opt.Race); err != nil {
			return out, err
		}
	}
	if err := env.Setup(ctx); err != nil {
		return out, err
	}
	var envv []string
	if len(opt.Bugs) > 0 {
		envv = append(envv, "LINKRAFT_JEPSEN_BUGS="+strings.Join(opt.Bugs, ","))
	}
	rec := history.NewRecorder()
	d, err := newDB(env, bin, dir, opt.Nodes, opt.NodeArgs, envv, rec, staleBound)
	if err != nil {
		_ = env.Teardown(context.WithoutCancel(ctx))
		return out, err
	}
	d.expect = opt.BootstrapExpect
	defer func() {
		// Whatever happened: end our nodes (by PID), then the small disk
		// and the network.
		d.stop(stopGrace)
		if uerr := d.unmountSmallDisk(context.WithoutCancel(ctx)); uerr != nil && err == nil {
			err = uerr
		}
		if terr := env.Teardown(context.WithoutCancel(ctx)); terr != nil && err == nil {
			err = terr
		}
	}()
	if slices.Contains(faults, "disk-full") {
		if err := d.mountSmallDisk(ctx); err != nil {
			return out, err
		}
		opt.logf("%s keeps its data dir on a %s tmpfs (the disk-full fault)", d.diskNode().id, smallDiskSize)
	}

	cl := newClient(opt.OpTimeout, opt.Concurrency*len(workloads), d.adminKey)
	opt.logf("starting %d nodes in namespaces %s..%s", opt.Nodes, env.Namespace(0), env.Namespace(opt.Nodes-1))
	if err := d.startAll(opt.StartJitter, opt.Seed); err != nil {
		return out, err
	}
	readyCtx, cancel := context.WithTimeout(ctx, opt.RecoveryTimeout)
	err = d.awaitReady(readyCtx, cl.http)
	cancel()
	if err != nil {
		return out, fmt.Errorf("cluster never became ready: %w (see %s/nodes/*/log)", err, dir)
	}
	opt.logf("cluster ready; running %s for %s with nemesis %v every %s", strings.Join(workloads, ", "), opt.TimeLimit, faults, opt.NemesisInterval)

	tag := strconv.FormatInt(time.Now().UnixNano()%(1<<40), 36)
	workers := opt.Concurrency * len(workloads)
	renv := &runEnv{
		rec: rec, cl: cl, nodes: d.nodes,
		urlPrefix: "https://example.com/jepsen/" + tag + "/",
		aliasTag:  "j" + tag,
		opsPerKey: opt.OpsPerKey, perKey: min(opt.PerKey, opt.Concurrency),
		interval: time.Duration(float64(workers) / opt.Rate * float64(time.Second)),
		deadline: time.Now().Add(opt.TimeLimit),
		seed:     opt.Seed,
	}
	nem := &nemesis{env: env, db: d, cl: cl, rec: rec, interval: opt.NemesisInterval,
		rng: rand.New(rand.NewPCG(opt.Seed, 0x6e656d)), lossPct: opt.LossPercent}
	nem.buildFaults(faults)

	var keys []string
	if slices.Contains(workloads, "counter") {
		if keys, err = counterKeys(ctx, renv); err != nil {
			return out, err
		}
	}
	var wg sync.WaitGroup
	var nemErr error
	wg.Go(func() { nemErr = nem.run(ctx, renv.deadline) })
	runWorkloads(ctx, renv, workloads, opt.Concurrency, keys)
	wg.Wait()
	if ctx.Err() != nil {
		return out, ctx.Err()
	}

	// Final phase: heal everything, wait for recovery, read the state.
	opt.logf("healing: network, paused, killed and crashed nodes")
	healErr := errors.Join(nemErr, nem.heal(ctx), env.Heal(ctx), d.restore())
	if healErr != nil {
		return out, healErr
	}
	rec.Add(history.Op{Process: history.NemesisProcess, Type: history.OK, F: "heal-all"})
	final := checker.Final{Resolves: map[string]map[string]checker.Read{}, Links: map[string][]checker.Listed{}, APIListed: map[string][]checker.Listed{},
		Leases: map[string][]checker.Lease{}}
	for _, n := range d.nodes {
		final.Nodes = append(final.Nodes, n.id)
	}
	readyCtx, cancel = context.WithTimeout(ctx, opt.RecoveryTimeout)
	rerr := d.awaitReady(readyCtx, cl.http)
	cancel()
	recovered := time.Now()
	final.Recovered = rerr == nil
	if rerr != nil {
		opt.logf("cluster did not recover: %v", rerr)
	} else {
		opt.logf("cluster recovered; final reads on every node")
	}
	// Guarantee 4 allows a node that does not host a shard to serve a
	// cached link for up to the remote-cache TTL after an update it never
	// heard of, and a replica that was cut off to lag until it has caught
	// up: the final reads start once that bound has passed since the
	// cluster recovered (and since the last write could have completed).
	from := renv.deadline.Add(opt.OpTimeout)
	if recovered.After(from) {
		from = recovered
	}
	if wait := time.Until(from.Add(staleBound)); wait > 0 {
		opt.logf("waiting %s: the staleness bound since recovery", wait.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-time.After(wait):
		}
	}
	if err := finalReads(ctx, renv, d, &final); err != nil {
		return out, err
	}
	if len(keys) > 0 {
		opt.logf("waiting for the click counters to settle")
		final.Counters = finalCounters(ctx, cl, d, keys, 30*time.Second)
	}
	opt.logf("comparing replicas")
	finalDigests(ctx, cl, d, &final, 30*time.Second)
	rec.Add(history.Op{Process: history.NemesisProcess, Type: history.OK, F: "final-reads-done"})
	ops := rec.Ops()
	out.Ops = len(ops)
	out.FaultLog = nem.faultRecords()
	out.Faults = checker.SummarizeFaults(out.FaultLog)

	// Stop the nodes (a clean exit is checked) before reading their logs.
	d.stop(stopGrace)
	out.Nodes = d.runs()
	opt.logf("checking %d history entries", len(ops))
	out.Results = check(ops, final, renv.urlPrefix, workloads, faults, out, d, dir)
	var vs []checker.Validity
	for _, r := range out.Results {
		vs = append(vs, r.Valid)
	}
	out.Valid = checker.Merge(vs...)
	if err := writeArtifacts(dir, ops, final, out, opt.Name); err != nil {
		return out, err
	}
	if out.Valid == checker.Valid && !opt.KeepData {
		for _, n := range d.nodes {
			_ = os.RemoveAll(filepath.Join(n.dir, "data"))
		}
	}
	if opt.Binary == "" {
		_ = os.Remove(bin)
	}
	return out, nil
}

// decodeSequential maps a code of linknode's -code-mode sequential back to
// its ID: the code is the ID in base62 (0-9, A-Z, a-z), without leading
// zeros. The harness talks to linknode over HTTP only, so it has its own
// copy of this tiny, documented format.
func decodeSequential(code string) (uint64, error) {
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	if code == "" || len(code) > 11 || (len(code) > 1 && code[0] == '0') {
		return 0, fmt.Errorf("%q is not a sequential code", code)
	}
	var id uint64
	for i := 0; i < len(code); i++ {
		d := strings.IndexByte(alphabet, code[i])
		if d < 0 {
			return 0, fmt.Errorf("%q is not a sequential code", code)
		}
		next := id*62 + uint64(d)
		if next/62 != id {
			return 0, fmt.Errorf("%q overflows", code)
		}
		id = next
	}
	return id, nil
}

// clickFlush is the linknode -click-flush the harness runs with, and
// clickLossWindow the counter checker's crash-loss bound: clicks a node
// served this long before it was killed may not have reached a committed
// batch (the flush interval plus time to commit, with margin).
const (
	clickFlush      = time.Second
	clickLossWindow = clickFlush + 2*time.Second
)

// staleBound is the linknode -remote-cache-ttl the harness runs with: the
// staleness bound of guarantee 4 (apply lag aside).
const staleBound = 5 * time.Second

// check runs the checkers of the selected workloads, and those that run
// always: stats, nodes, nemesis, replicas, logs.
func check(ops []history.Op, final checker.Final, prefix string, workloads, faults []string, out *Outcome, d *db, dir string) []checker.Result {
	windows := report.Windows(ops, float64(ops[len(ops)-1].Time)/1e9)
	var results []checker.Result
	results = append(results, checker.CheckStats(ops), checker.CheckNodes(out.Nodes), checker.CheckNemesis(faults, out.FaultLog))
	for _, w := range workloads {
		switch w {
		case "register":
			var ann []porcupine.Annotation
			for _, win := range windows {
				ann = append(ann, porcupine.Annotation{Tag: "nemesis", Start: int64(win.Start * 1e9), End: int64(win.End * 1e9),
					Description: win.Fault, BackgroundColor: "#f4cccc"})
			}
			results = append(results, checker.CheckRegister(ops, checker.RegisterOptions{
				HTMLPath: filepath.Join(dir, "history.html"), Annotations: ann}),
				checker.CheckConverge(ops, final))
		case "set":
			results = append(results, checker.CheckSet(ops, final, prefix))
		case "unique-ids":
			results = append(results, checker.CheckUniqueIDs(ops, final, decodeSequential))
		case "ryw":
			results = append(results, checker.CheckRYW(ops))
		case "counter":
			results = append(results, checker.CheckCounter(ops, final, checker.CounterOptions{LossWindow: clickLossWindow}))
		}
	}
	logs := map[string]string{}
	for _, n := range d.nodes {
		logs[n.id] = n.logPath
	}
	return append(results, checker.CheckReplicas(final), checker.CheckLogs(logs))
}

// finalReads reads the state after recovery. Every register code is read
// linearizably through every node, and those reads go into the history,
// where the register checker judges them with the rest (a lost or
// reverted write, a resurrected delete, shows in them even on a code the
// workload left long ago). Then every node's listing and lease history are
// gathered, and every code the checkers care about — acknowledged creates,
// indeterminate creates some node holds, register codes — is resolved on
// every node.
func finalReads(ctx context.Context, e *runEnv, d *db, final *checker.Final) error {
	cl := e.cl
	pairs, err := history.Pairs(e.rec.Ops())
	if err != nil {
		return err
	}
	codes := map[string]bool{}
	var registers []string
	attempted := map[string]bool{} // URLs of generated creates whose outcome is unknown
	for _, p := range pairs {
		switch {
		case p.Invoke.Workload == "register":
			if !codes[p.Invoke.Key] {
				registers = append(registers, p.Invoke.Key)
			}
			codes[p.Invoke.Key] = true
		case p.Invoke.F != checker.FCreate:
		case p.Completion != nil && p.Completion.Type == history.OK:
			codes[p.Completion.Key] = true
		case p.Completion == nil || p.Completion.Type == history.Info:
			attempted[p.Invoke.Value] = true
		}
	}
	// The truth about each register code: linearizable reads through every
	// node, recorded as register operations of processes of their own.
	final.Truth = map[string]checker.Read{}
	for _, code := range registers {
		rd := checker.Read{Error: "no node answered"}
		for _, n := range d.nodes {
			w := &worker{env: e, workload: "register", process: e.rec.NewProcess()}
			r := w.exec(checker.FRead, n, code, "", func() result { return cl.read(ctx, n.HTTP(), code) })
			if r.typ == history.OK && rd.Error != "" {
				rd = checker.Read{Status: r.op.Status, Location: r.op.Value}
			}
		}
		final.Truth[code] = rd
	}
	// The API's listing through every node first, then every node's own
	// store: a link the API lists was committed before any store was read,
	// so some store holds it, and a stored link is committed, so every
	// listing holds it (CheckSet compares them).
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, len(d.nodes))
	for i, n := range d.nodes {
		wg.Go(func() {
			// A listing needs every shard's leader: asked again (a page
			// at a time restarts) while one is being elected.
			actx, cancel := context.WithTimeout(ctx, time.Minute)
			listed, err := cl.apiLinks(actx, n.HTTP())
			for err != nil && actx.Err() == nil {
				select {
				case <-actx.Done():
				case <-time.After(500 * time.Millisecond):
					listed, err = cl.apiLinks(actx, n.HTTP())
				}
			}
			cancel()
			if err != nil {
				errs[i] = fmt.Errorf("api listing through %s: %w", n.id, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			final.APIListed[n.id] = listed
		})
	}
	wg.Wait()
	// Listings and lease histories, from every node.
	for i, n := range d.nodes {
		wg.Go(func() {
			lctx, cancel := context.WithTimeout(ctx, time.Minute)
			links, err := cl.links(lctx, n.Admin())
			cancel()
			if err != nil {
				// The checkers see a node they could not read and say
				// unknown rather than valid.
				errs[i] = fmt.Errorf("listing %s: %w", n.id, err)
				return
			}
			leases, lerr := cl.leases(ctx, n.Admin())
			if lerr != nil {
				errs[i] = fmt.Errorf("leases of %s: %w", n.id, lerr)
			}
			mu.Lock()
			defer mu.Unlock()
			final.Links[n.id] = links
			if lerr == nil {
				final.Leases[n.id] = leases
			}
		})
	}
	wg.Wait()
	for _, links := range final.Links {
		for _, l := range links {
			if attempted[l.URL] {
				codes[l.Code] = true // seen stored: known, so checked everywhere
			}
		}
	}
	sorted := make([]string, 0, len(codes))
	for c := range codes {
		sorted = append(sorted, c)
	}
	sort.Strings(sorted)
	for _, n := range d.nodes {
		final.Resolves[n.id] = map[string]checker.Read{} // before any reader starts
	}
	for _, n := range d.nodes {
		wg.Go(func() {
			sem := make(chan struct{}, 32)
			var rw sync.WaitGroup
			for _, code := range sorted {
				sem <- struct{}{}
				rw.Go(func() {
					defer func() { <-sem }()
					// A read that times out or meets a 503 (an election
					// the load set off after recovery) is asked again, up
					// to 4 times: the final read is the first definite
					// answer, as Jepsen's final reads are.
					r := cl.resolve(ctx, n.HTTP(), code)
					for try := 1; r.typ != history.OK && try < 4 && ctx.Err() == nil; try++ {
						select {
						case <-ctx.Done():
						case <-time.After(500 * time.Millisecond):
						}
						r = cl.resolve(ctx, n.HTTP(), code)
					}
					rd := checker.Read{Status: r.op.Status, Error: r.op.Error}
					if r.typ == history.OK {
						rd.Location = r.op.Value
					} else if rd.Error == "" {
						rd.Error = "indeterminate"
					}
					mu.Lock()
					final.Resolves[n.id][code] = rd
					mu.Unlock()
				})
			}
			rw.Wait()
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		final.Recovered = false
		final.ReadErrors = append(final.ReadErrors, err.Error())
	}
	return nil
}

// finalDigests polls every node's replica digests until every group's
// replicas are at the same applied index twice in a row (the cluster is
// quiet), or limit passes; it also records each group's members from the
// nodes' Raft configurations.
func finalDigests(ctx context.Context, cl *client, d *db, final *checker.Final, limit time.Duration) {
	final.Replicas = map[string][]string{}
	for _, n := range d.nodes {
		st, err := cl.status(ctx, n.Admin())
		if err != nil {
			continue
		}
		for _, g := range append([]groupStatus{st.Meta}, st.Shards...) {
			if len(g.Replicas) > len(final.Replicas[g.ID]) {
				final.Replicas[g.ID] = g.Replicas
			}
		}
	}
	poll := func() map[string][]checker.GroupDigest {
		out := map[string][]checker.GroupDigest{}
		for _, n := range d.nodes {
			if ds, err := cl.digests(ctx, n.Admin()); err == nil {
				out[n.id] = ds
			}
		}
		return out
	}
	settled := func(a, b map[string][]checker.GroupDigest) bool {
		index := map[string]uint64{}
		for _, n := range d.nodes {
			if len(a[n.id]) == 0 || !slices.Equal(a[n.id], b[n.id]) {
				return false
			}
			for _, g := range a[n.id] {
				if i, ok := index[g.Group]; ok && i != g.AppliedIndex {
					return false
				}
				index[g.Group] = g.AppliedIndex
			}
		}
		return true
	}
	final.Digests, final.DigestsSettled = settle(ctx, 500*time.Millisecond, limit, poll, settled)
}

// newRunDir makes store/<name>/<timestamp>/ and points store/<name>/latest
// and store/latest at it.
func newRunDir(store, name string) (string, error) {
	ts := time.Now().Format("20060102T150405.000")
	dir := filepath.Join(store, name, ts)
	if err := os.MkdirAll(filepath.Join(dir, "nodes"), 0o755); err != nil {
		return "", err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for _, link := range []struct{ at, target string }{
		{filepath.Join(store, name, "latest"), ts},
		{filepath.Join(store, "latest"), filepath.Join(name, ts)},
	} {
		_ = os.Remove(link.at)
		if err := os.Symlink(link.target, link.at); err != nil {
			return "", err
		}
	}
	return abs, nil
}

// buildLinknode builds ./cmd/linknode of this module into bin.
func buildLinknode(ctx context.Context, bin, tags string, race bool) error {
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	args := []string{"build", "-o", bin}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "./cmd/linknode")...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build linknode: %w: %s", err, out)
	}
	return nil
}

func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("run the harness from inside the linkraft module (or pass -binary)")
	}
	return filepath.Dir(mod), nil
}

func testRecord(opt Options, workloads, faults []string) map[string]any {
	return map[string]any{
		"name": opt.Name, "nodes": opt.Nodes, "bootstrap_expect": opt.BootstrapExpect, "start_jitter": opt.StartJitter.String(), "time_limit": opt.TimeLimit.String(), "concurrency": opt.Concurrency,
		"rate": opt.Rate, "nemesis": faults, "nemesis_interval": opt.NemesisInterval.String(), "workloads": workloads,
		"ops_per_key": opt.OpsPerKey, "per_key": opt.PerKey, "op_timeout": opt.OpTimeout.String(), "seed": opt.Seed,
		"build_tags": opt.BuildTags, "race": opt.Race, "bugs": opt.Bugs, "node_args": opt.NodeArgs,
		"loss_percent": opt.LossPercent, "started": time.Now().UTC().Format(time.RFC3339),
	}
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func writeFile(path string, fn func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeArtifacts writes the history, the nemesis log, the final reads, the
// results and the plots.
func writeArtifacts(dir string, ops []history.Op, final checker.Final, out *Outcome, name string) error {
	var nem []history.Op
	for _, op := range ops {
		if op.Process == history.NemesisProcess {
			nem = append(nem, op)
		}
	}
	windows := report.Windows(ops, float64(ops[len(ops)-1].Time)/1e9)
	return errors.Join(
		writeFile(filepath.Join(dir, "history.jsonl"), func(w io.Writer) error { return history.WriteJSONL(w, ops) }),
		writeFile(filepath.Join(dir, "history.edn"), func(w io.Writer) error { return history.WriteEDN(w, ops) }),
		writeFile(filepath.Join(dir, "nemesis.jsonl"), func(w io.Writer) error { return history.WriteJSONL(w, nem) }),
		writeJSON(filepath.Join(dir, "final.json"), final),
		writeJSON(filepath.Join(dir, "results.json"), out),
		report.Latency(filepath.Join(dir, "latency-raw.png"), ops, windows, name),
		report.Rate(filepath.Join(dir, "rate.png"), ops, windows, name),
	)
}
