package jepsen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
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
	// NemesisFirst are faults (of the Nemesis list) injected first, in
	// this order, before the random draws: a short run that must hold
	// some faults (CI's: a power cut and a crash point) holds them.
	NemesisFirst string
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
	// Backup takes a backup halfway through the run and restores it into
	// a fresh node after it (the backup checker).
	Backup bool
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
	tr, err := newTrial(ctx, opt)
	if tr == nil || err != nil {
		return tr.outcome(), err
	}
	defer func() {
		// Whatever happened: end our nodes (by PID), then the small disk
		// and the network.
		tr.d.stop(stopGrace)
		if uerr := tr.d.unmountSmallDisk(context.WithoutCancel(ctx)); uerr != nil && err == nil {
			err = uerr
		}
		if uerr := tr.d.unmountLazy(); uerr != nil && err == nil {
			err = uerr
		}
		if terr := tr.env.Teardown(context.WithoutCancel(ctx)); terr != nil && err == nil {
			err = terr
		}
	}()
	if err := tr.start(ctx); err != nil {
		return tr.out, err
	}
	if err := tr.operate(ctx); err != nil {
		return tr.out, err
	}
	final, err := tr.finish(ctx)
	if err != nil {
		return tr.out, err
	}
	return tr.out, tr.judge(final)
}

// trial is one run of the harness: its options, network, nodes and
// history, and the outcome it builds.
type trial struct {
	opt       Options
	workloads []string
	faults    []string
	env       *netns.Env
	dir, bin  string
	rec       *history.Recorder
	d         *db
	cl        *client
	renv      *runEnv
	nem       *nemesis
	keys      []string // the counter workload's codes
	bk        *backupTaker
	out       *Outcome
}

func (tr *trial) outcome() *Outcome {
	if tr == nil {
		return nil
	}
	return tr.out
}

// newTrial checks opt, makes the run folder, builds linknode and sets up
// the network and the nodes' processes (not started). A nil trial means
// nothing was set up.
func newTrial(ctx context.Context, opt Options) (*trial, error) {
	if err := opt.defaults(); err != nil {
		return nil, err
	}
	tr := &trial{opt: opt}
	var err error
	if tr.workloads, err = parseWorkloads(opt.Workloads); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadOptions, err)
	}
	if tr.faults, err = parseNemesis(opt.Nemesis); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadOptions, err)
	}
	crash := slices.ContainsFunc(tr.faults, func(f string) bool { return slices.Contains(crashFaults, f) })
	if tags := strings.Fields(strings.ReplaceAll(opt.BuildTags, ",", " ")); crash && !slices.Contains(tags, "jepsencrash") {
		if opt.Binary != "" {
			return nil, fmt.Errorf("%w: the crash faults need linknode built with -tags jepsencrash (not -binary)", ErrBadOptions)
		}
		opt.BuildTags = strings.Join(append(tags, "jepsencrash"), ",")
		tr.opt.BuildTags = opt.BuildTags
	}
	if tr.env, err = netns.New(netns.Config{Prefix: opt.Prefix, Nodes: opt.Nodes, Subnet: opt.Subnet}); err != nil {
		return nil, err
	}
	if tr.dir, err = newRunDir(opt.Store, opt.Name); err != nil {
		return nil, err
	}
	tr.out = &Outcome{Dir: tr.dir, Valid: checker.Unknown}
	opt.logf("run folder %s (seed %d)", tr.dir, opt.Seed)
	if err := writeJSON(filepath.Join(tr.dir, "test.json"), testRecord(opt, tr.workloads, tr.faults)); err != nil {
		return nil, err
	}
	tr.bin = opt.Binary
	if tr.bin == "" {
		tr.bin = filepath.Join(tr.dir, "linknode")
		opt.logf("building linknode (tags %q, race %v)", opt.BuildTags, opt.Race)
		if err := buildLinknode(ctx, tr.bin, opt.BuildTags, opt.Race); err != nil {
			return nil, err
		}
	}
	if err := tr.env.Setup(ctx); err != nil {
		return nil, err
	}
	var envv []string
	if len(opt.Bugs) > 0 {
		envv = append(envv, "LINKRAFT_JEPSEN_BUGS="+strings.Join(opt.Bugs, ","))
	}
	tr.rec = history.NewRecorder()
	if tr.d, err = newDB(tr.env, tr.bin, tr.dir, opt.Nodes, opt.NodeArgs, envv, tr.rec, staleBound); err != nil {
		_ = tr.env.Teardown(context.WithoutCancel(ctx))
		return nil, err
	}
	tr.d.expect = opt.BootstrapExpect
	tr.d.crashPoints = crash
	return tr, nil
}

// start starts the nodes (the disk-full fault's node on a small disk) and
// waits until the cluster is ready.
func (tr *trial) start(ctx context.Context) error {
	opt, d := tr.opt, tr.d
	if slices.Contains(tr.faults, "disk-full") {
		if err := d.mountSmallDisk(ctx); err != nil {
			return err
		}
		opt.logf("%s keeps its data dir on a %s tmpfs (the disk-full fault)", d.diskNode().id, smallDiskSize)
	}
	if slices.Contains(tr.faults, "power-loss") {
		if slices.Contains(tr.faults, "disk-full") {
			return fmt.Errorf("%w: power-loss and disk-full both need the data dirs' file system", ErrBadOptions)
		}
		if err := d.mountLazy(); err != nil {
			return err
		}
		opt.logf("the data dirs are on lazyfs: writes not fsynced are lost at a power-loss fault")
	}
	tr.cl = newClient(opt.OpTimeout, opt.Concurrency*len(tr.workloads), d.adminKey)
	opt.logf("starting %d nodes in namespaces %s..%s", opt.Nodes, tr.env.Namespace(0), tr.env.Namespace(opt.Nodes-1))
	if err := d.startAll(opt.StartJitter, opt.Seed); err != nil {
		return err
	}
	readyCtx, cancel := context.WithTimeout(ctx, opt.RecoveryTimeout)
	err := d.awaitReady(readyCtx, tr.cl.http)
	cancel()
	if err != nil {
		return fmt.Errorf("cluster never became ready: %w (see %s/nodes/*/log)", err, tr.dir)
	}
	return nil
}

// operate runs the workloads and the nemesis until the time limit.
func (tr *trial) operate(ctx context.Context) error {
	opt := tr.opt
	opt.logf("cluster ready; running %s for %s with nemesis %v every %s", strings.Join(tr.workloads, ", "), opt.TimeLimit, tr.faults, opt.NemesisInterval)
	tag := strconv.FormatInt(time.Now().UnixNano()%(1<<40), 36)
	workers := opt.Concurrency * len(tr.workloads)
	tr.renv = &runEnv{
		rec: tr.rec, cl: tr.cl, nodes: tr.d.nodes,
		urlPrefix: "https://example.com/jepsen/" + tag + "/",
		aliasTag:  "j" + tag,
		opsPerKey: opt.OpsPerKey, perKey: min(opt.PerKey, opt.Concurrency),
		interval: time.Duration(float64(workers) / opt.Rate * float64(time.Second)),
		deadline: time.Now().Add(opt.TimeLimit),
		seed:     opt.Seed,
	}
	tr.nem = &nemesis{env: tr.env, db: tr.d, cl: tr.cl, rec: tr.rec, interval: opt.NemesisInterval,
		rng: rand.New(rand.NewPCG(opt.Seed, 0x6e656d)), lossPct: opt.LossPercent}
	tr.nem.buildFaults(tr.faults)
	if tr.d.crashPoints {
		tr.nem.crashNext = tr.nem.rng.IntN(len(crashCycle)) // each seed starts the cycle elsewhere
	}
	if err := tr.nem.putFirst(opt.NemesisFirst); err != nil {
		return fmt.Errorf("%w: %w", ErrBadOptions, err)
	}
	if slices.Contains(tr.workloads, "counter") {
		var err error
		if tr.keys, err = counterKeys(ctx, tr.renv); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	var nemErr error
	wg.Go(func() { nemErr = tr.nem.run(ctx, tr.renv.deadline) })
	if opt.Backup {
		tr.bk = &backupTaker{bin: tr.bin, dir: tr.dir, key: tr.d.adminKey, nodes: tr.d.nodes, rec: tr.rec, logf: opt.logf}
		wg.Go(func() { tr.bk.run(ctx, time.Now().Add(opt.TimeLimit/2), tr.renv.deadline) })
	}
	runWorkloads(ctx, tr.renv, tr.workloads, opt.Concurrency, tr.keys)
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	// Heal everything before the final phase.
	opt.logf("healing: network, paused, killed and crashed nodes")
	if err := errors.Join(nemErr, tr.nem.heal(ctx), tr.env.Heal(ctx), tr.d.restore()); err != nil {
		return err
	}
	tr.rec.Add(history.Op{Process: history.NemesisProcess, Type: history.OK, F: "heal-all"})
	return nil
}

// finish waits for the cluster to recover and the staleness bound to
// pass, then reads the final state: every node's reads, counters and
// replica digests.
func (tr *trial) finish(ctx context.Context) (checker.Final, error) {
	opt, d := tr.opt, tr.d
	final := checker.Final{Resolves: map[string]map[string]checker.Read{}, Links: map[string][]checker.Listed{}, APIListed: map[string][]checker.Listed{},
		Leases: map[string][]checker.Lease{}}
	for _, n := range d.nodes {
		final.Nodes = append(final.Nodes, n.id)
	}
	readyCtx, cancel := context.WithTimeout(ctx, opt.RecoveryTimeout)
	rerr := d.awaitReady(readyCtx, tr.cl.http)
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
	from := tr.renv.deadline.Add(opt.OpTimeout)
	if recovered.After(from) {
		from = recovered
	}
	if wait := time.Until(from.Add(staleBound)); wait > 0 {
		opt.logf("waiting %s: the staleness bound since recovery", wait.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return final, ctx.Err()
		case <-time.After(wait):
		}
	}
	if err := finalReads(ctx, tr.renv, d, &final); err != nil {
		return final, err
	}
	if len(tr.keys) > 0 {
		opt.logf("waiting for the click counters to settle")
		final.Counters = finalCounters(ctx, tr.cl, d, tr.keys, 30*time.Second)
	}
	opt.logf("comparing replicas")
	finalDigests(ctx, tr.cl, d, &final, 30*time.Second)
	if tr.bk != nil {
		final.Backup = tr.bk.restoreCheck(ctx, tr.cl, backupCodes(tr.rec.Ops(), final.Links), d.adminKeyFile)
	}
	tr.rec.Add(history.Op{Process: history.NemesisProcess, Type: history.OK, F: "final-reads-done"})
	return final, nil
}

// judge stops the nodes (a clean exit is checked), runs the checkers and
// writes the artifacts.
func (tr *trial) judge(final checker.Final) error {
	opt, d, out := tr.opt, tr.d, tr.out
	ops := tr.rec.Ops()
	out.Ops = len(ops)
	out.FaultLog = tr.nem.faultRecords()
	legitDuring(out.FaultLog, ops)
	out.Faults = checker.SummarizeFaults(out.FaultLog)
	d.stop(stopGrace)
	out.Nodes = d.runs()
	opt.logf("checking %d history entries", len(ops))
	out.Results = check(ops, final, tr.renv.urlPrefix, tr.workloads, tr.faults, out, d, tr.dir)
	var vs []checker.Validity
	for _, r := range out.Results {
		vs = append(vs, r.Valid)
	}
	out.Valid = checker.Merge(vs...)
	if err := writeArtifacts(tr.dir, ops, final, out, opt.Name); err != nil {
		return err
	}
	if out.Valid == checker.Valid && !opt.KeepData {
		for _, n := range d.nodes {
			_ = os.RemoveAll(filepath.Join(n.dir, "data"))
		}
	}
	if opt.Binary == "" {
		_ = os.Remove(tr.bin)
	}
	return nil
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
//
// faultRecovery is how long after a fault ends the checker allows a shard
// to be unable to commit (a killed node restarting and elections with the
// default 1 s timers): a click served while a fault was in force, or before
// this had passed since, has its loss window counted from then. Measured
// here: 2.3-4.6 s from a restart to /readyz under -race on 2 cores, and in
// one CI run clicks served during a kill-majority were still uncommitted
// when every node was killed 5.3 s after the majority came back.
const (
	clickFlush      = time.Second
	clickLossWindow = clickFlush + 2*time.Second
	faultRecovery   = 8 * time.Second
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
			results = append(results, checker.CheckCounter(ops, final, checker.CounterOptions{LossWindow: clickLossWindow, Recovery: faultRecovery,
				Kills: nemesisKills(d.runs())}))
		}
	}
	if final.Backup != nil {
		results = append(results, checker.CheckBackup(ops, final.Backup))
	}
	logs := map[string]string{}
	for _, n := range d.nodes {
		logs[n.id] = n.logPath
	}
	return append(results, checker.CheckReplicas(final), checker.CheckLogs(logs))
}
