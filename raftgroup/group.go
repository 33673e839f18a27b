package raftgroup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/internal/boltcheck"
	"github.com/linkraft/linkraft/link"
	"github.com/linkraft/linkraft/raftgroup/nodelog"
)

// StateMachine is what a Group needs from its FSM: raft's batching FSM plus
// the applied index it keeps on disk and a Close for its file.
type StateMachine interface {
	raft.BatchingFSM
	AppliedIndex() uint64
	Close() error
}

// Timing holds the Raft timers of a group. The zero value means
// DefaultTiming.
type Timing struct {
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
}

// DefaultTiming is hashicorp/raft's defaults (1 s heartbeat and election
// timeout, 500 ms leader lease, 50 ms commit timeout): on a LAN a failed
// leader is replaced in one to two seconds, and idle heartbeats stay at 5–10
// RPC/s per follower per group.
var DefaultTiming = Timing{
	HeartbeatTimeout:   time.Second,
	ElectionTimeout:    time.Second,
	LeaderLeaseTimeout: 500 * time.Millisecond,
	CommitTimeout:      50 * time.Millisecond,
}

// noPipeline turns off hashicorp/raft's pipelined replication. In v1.8.0 a
// follower that answers an append with Success=false can leave the
// pipeline's two unbuffered channels each waiting on the other: the leader
// keeps heartbeating that follower but never sends it another entry, and
// Shutdown hangs (seen here in the multi-node tests; the same analysis is in
// grafana/pyroscope#5518, which disabled pipelining for it). Without the
// pipeline, raft replicates with one AppendEntries in flight per follower,
// each carrying up to MaxAppendEntries entries.
//
// It also fences heartbeats off from the log store's close. raft answers a
// heartbeat on the transport's connection goroutine, not on its own, so
// raft.Shutdown does not wait for one in progress; one that got past raft's
// shutdown check and wrote the term after the log store had closed would
// panic ("failed to save current term: database not open").
// quiesce waits for heartbeats in progress and turns later ones away.
type noPipeline struct {
	*raft.NetworkTransport
	hbMu     sync.RWMutex
	hbClosed bool
}

// AppendEntriesPipeline implements raft.Transport by refusing.
func (*noPipeline) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

// SetHeartbeatHandler implements raft.Transport, wrapping cb in the fence.
func (t *noPipeline) SetHeartbeatHandler(cb func(rpc raft.RPC)) {
	if cb == nil {
		t.NetworkTransport.SetHeartbeatHandler(nil)
		return
	}
	t.NetworkTransport.SetHeartbeatHandler(func(rpc raft.RPC) {
		t.hbMu.RLock()
		defer t.hbMu.RUnlock()
		if t.hbClosed {
			rpc.Respond(nil, raft.ErrRaftShutdown)
			return
		}
		cb(rpc)
	})
}

// quiesce waits for the heartbeats being handled and refuses later ones;
// after it, nothing of raft's touches the log store.
func (t *noPipeline) quiesce() {
	t.hbMu.Lock()
	t.hbClosed = true
	t.hbMu.Unlock()
}

// FastTiming elects a leader in a few hundred milliseconds. It is for tests
// and local experiments on one machine (linknode -fast-raft), not for
// clusters on a real network: 200 ms of silence starts an election.
var FastTiming = Timing{
	HeartbeatTimeout:   200 * time.Millisecond,
	ElectionTimeout:    200 * time.Millisecond,
	LeaderLeaseTimeout: 100 * time.Millisecond,
	CommitTimeout:      5 * time.Millisecond,
}

// SnapshotPolicy says when a group snapshots and how much log it keeps
// behind a snapshot.
type SnapshotPolicy struct {
	Threshold    uint64
	TrailingLogs uint64
	Interval     time.Duration
	// TrailingBytes bounds the log kept behind a snapshot by its bytes
	// too, for a group in the node's shared log (Config.Log): every
	// Interval the group keeps TrailingLogs entries or as many as about
	// TrailingBytes hold at their average size, whichever is fewer (but
	// at least minTrailing), and snapshots once its log holds twice
	// TrailingBytes. raft counts entries, not bytes, and a bulk import's
	// entries are large (a shard's part of a 1,000-link request, about
	// 125 links or 5 KB): its groups kept 2,048 to twice that of them, and
	// a group below the snapshot threshold every one. -1: no bound.
	TrailingBytes int64
}

// minTrailing is the fewest entries TrailingBytes leaves behind a snapshot.
const minTrailing = 32

// DefaultSnapshots is the policy of every group unless overridden: check
// every 10 s (raft adds up to 10 s of jitter), snapshot once 2,048 entries
// have been applied since the last one, keep 2,048 entries behind it.
// Snapshots are markers (see fsm.LiveStateMarker), so taking them often
// costs nothing but the log compaction, and the log — which otherwise holds
// every bulk-import entry of the last two minutes, a second copy of the
// data on disk — stays at about 4,096 entries. A follower more than 2,048
// entries behind is sent a copy of the leader's state file instead of the
// log (and the leader does not compact its log while the copy is out).
// A follower of a group of small entries (about 200 bytes a create) is
// sent the state file once it is about 400 KB behind; TrailingBytes gives
// a group of large ones twenty times that.
var DefaultSnapshots = SnapshotPolicy{Threshold: 2048, TrailingLogs: 2048, Interval: 10 * time.Second, TrailingBytes: 8 << 20}

// Config configures one Raft group.
type Config struct {
	// Name identifies the group in logs and metrics ("meta", "shard-3").
	Name string
	// NodeID is this node's stable Raft server ID.
	NodeID string
	// Dir holds snapshots/ and, when Log is nil, raft.db (the group's own
	// log and stable store).
	Dir string
	// Log, if set, is the group's log and stable store in the node's
	// shared log file (package nodelog); the Group closes this view, not
	// the file.
	Log *nodelog.Log
	// FSM is the group's state machine; the Group closes it.
	FSM StateMachine
	// Stream is the group's layer of the node's peer port.
	Stream raft.StreamLayer
	// VerifyRPC, if set, checks every incoming Raft request against the
	// connection it came on (the cluster holds the claimed server ID to
	// the peer's certificate); an error drops the connection.
	VerifyRPC func(conn net.Conn, header raft.RPCHeader) error
	// Timing overrides the Raft timers; zero fields take DefaultTiming.
	Timing Timing
	// Snapshots overrides the snapshot policy; zero fields take
	// DefaultSnapshots.
	Snapshots SnapshotPolicy
	// Logger receives the group's logs; "group" is added to every line.
	Logger *slog.Logger
}

// Group is one hashicorp/raft group: raft-boltdb log and stable store, a file
// snapshot store, a network transport over the node's shared peer port, and
// the FSM.
type Group struct {
	name      string
	nodeID    string
	raft      *raft.Raft
	fsm       StateMachine
	logStore  logBackend
	logs      raft.LogStore // the cached view of logStore
	transport groupTransport
	log       *slog.Logger

	notifyCh chan bool
	// barrierTerm is the term in which this node, as leader, last applied a
	// barrier; 0 when not leader. Consistent reads need it to equal the
	// current term.
	barrierTerm atomic.Uint64
	// The leader lease (see ConfirmLeader): when a quorum last confirmed
	// this node's leadership, as the start time of the confirming
	// operation; confirmations that started before the last reset (a
	// leadership change or a transfer this node began) do not count.
	leaseMu    sync.Mutex
	quorumAt   time.Time
	leaseReset time.Time
	lease      time.Duration
	// heartbeat is the configured heartbeat timeout (electIfSoleVoter
	// shortens raft's for a moment and puts this back).
	heartbeat time.Duration
	// reloadMu orders the read-modify-write reloads of raft's
	// configuration (electIfSoleVoter, boundLog).
	reloadMu  sync.Mutex
	stop      chan struct{}
	ctx       context.Context // cancelled by Close
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// groupTransport is a group's raft.Transport, which it closes.
type groupTransport interface {
	raft.Transport
	Close() error
}

// Open opens the group's stores and starts its raft.Raft over the node's
// peer port (cfg.Stream). A group with no state waits for Bootstrap (or,
// later, to be added by a leader).
func Open(cfg Config) (*Group, error) {
	if cfg.FSM == nil || cfg.Stream == nil || cfg.NodeID == "" || cfg.Dir == "" {
		return nil, errors.New("raftgroup: Config needs FSM, Stream, NodeID and Dir")
	}
	hl := NewHCLogger(logger(cfg), "raft")
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:    cfg.Stream,
		MaxPool:   2,
		Timeout:   10 * time.Second,
		Logger:    hl.Named("transport"),
		VerifyRPC: cfg.VerifyRPC,
	})
	g, err := open(cfg, &noPipeline{NetworkTransport: trans})
	if err != nil {
		trans.Close()
	}
	return g, err
}

// logger is the group's logger: cfg's, with the group's name.
func logger(cfg Config) *slog.Logger {
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	return lg.With("group", cfg.Name)
}

// open opens the group's stores and starts its raft.Raft over trans (the
// peer port's; raft's in-memory one in this package's tests).
func open(cfg Config, trans groupTransport) (*Group, error) {
	lg := logger(cfg)
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, err
	}
	t := cfg.Timing
	if t.HeartbeatTimeout == 0 {
		t.HeartbeatTimeout = DefaultTiming.HeartbeatTimeout
	}
	if t.ElectionTimeout == 0 {
		t.ElectionTimeout = DefaultTiming.ElectionTimeout
	}
	if t.LeaderLeaseTimeout == 0 {
		t.LeaderLeaseTimeout = DefaultTiming.LeaderLeaseTimeout
	}
	if t.CommitTimeout == 0 {
		t.CommitTimeout = DefaultTiming.CommitTimeout
	}

	hl := NewHCLogger(lg, "raft")
	rc, err := raftConfig(cfg, t, hl)
	if err != nil {
		return nil, err
	}
	notify := make(chan bool, 8)
	rc.NotifyCh = notify
	logStore, cached, snaps, err := openStores(cfg, hl)
	if err != nil {
		return nil, err
	}
	r, err := raft.NewRaft(rc, cfg.FSM, cached, logStore, snaps, trans)
	if err != nil {
		logStore.Close()
		return nil, fmt.Errorf("shard %s: start raft: %w", cfg.Name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := &Group{
		name: cfg.Name, nodeID: cfg.NodeID, raft: r, fsm: cfg.FSM, logStore: logStore, logs: cached,
		transport: trans, log: lg, notifyCh: notify, stop: make(chan struct{}), ctx: ctx, cancel: cancel,
		// Voters that acknowledged this leader refuse other candidates
		// until their heartbeat timeout (at least HeartbeatTimeout) runs
		// out; half of it leaves room for clock-rate drift and scheduling.
		lease:     t.HeartbeatTimeout / 2,
		heartbeat: t.HeartbeatTimeout,
	}
	g.wg.Add(2)
	go g.monitorLeadership()
	// Not in line: reading the configuration waits for raft's main loop,
	// which a snapshot install already queued would hold for its length.
	go func() {
		defer g.wg.Done()
		g.electIfSoleVoter()
	}()
	budget := cfg.Snapshots.TrailingBytes
	if budget == 0 {
		budget = DefaultSnapshots.TrailingBytes
	}
	if cfg.Log != nil && budget > 0 {
		g.wg.Add(1)
		go g.boundLog(cfg.Log, rc.SnapshotInterval, rc.TrailingLogs, budget)
	}
	return g, nil
}

// boundLog keeps the log behind a snapshot to about budget bytes (see
// SnapshotPolicy.TrailingBytes), checking every interval: it lowers raft's
// TrailingLogs while the entries are large (raising it back to most when
// they are small again), and takes a snapshot, which compacts the log,
// once the log holds twice budget. A snapshot refused (nothing new since
// the last, or the state file being copied to a follower) is tried again
// at the next check.
func (g *Group) boundLog(l *nodelog.Log, interval time.Duration, most uint64, budget int64) {
	defer g.wg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	kept := most
	for {
		select {
		case <-g.stop:
			return
		case <-t.C:
		}
		n, size, err := l.Size()
		if err != nil || n == 0 {
			continue
		}
		if want := trailingFor(n, size, budget, most); want != kept {
			g.reloadMu.Lock()
			rc := g.raft.ReloadableConfig()
			rc.TrailingLogs = want
			err := g.raft.ReloadConfig(rc)
			g.reloadMu.Unlock()
			if err != nil {
				g.log.Warn("could not set the trailing log entries", "entries", want, "err", err)
				continue
			}
			kept = want
		}
		if size > 2*budget {
			if err := WaitFuture(g.ctx, g.raft.Snapshot()); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
				g.log.Debug("snapshot to bound the log not taken; trying again later", "log_bytes", size, "err", err)
			}
		}
	}
}

// trailingFor is how many entries of a log of entries and size bytes fit
// in budget at their average size: at most most, at least minTrailing.
func trailingFor(entries int, size, budget int64, most uint64) uint64 {
	avg := max(size/int64(entries), 1)
	return min(most, max(uint64(budget/avg), minTrailing))
}

// electIfSoleVoter starts an election at once when the group's latest
// configuration names this node as its only voter. Such a group has no
// leader to hear from, yet raft waits a heartbeat timeout (1–2 s by
// default) before it stands: a restarted one-node cluster waited that
// long for its meta group and again for its shards. raft's documented
// way to cut the wait is a reload with a shorter heartbeat timeout, which
// wakes the follower's timer now; the timeout is put back at once (the
// timer only reads it after it fires, and a group that has never heard
// from a leader then stands). raft refuses a heartbeat timeout below the
// leader lease, so timings whose lease equals their heartbeat timeout (the
// test clusters') wait as before.
func (g *Group) electIfSoleVoter() {
	f := g.raft.GetConfiguration()
	if f.Error() != nil || !soleVoter(f.Configuration(), g.nodeID) {
		return
	}
	// From the configured timeout, not the current one: the open's check
	// and a Bootstrap's may run at once, and each puts back the same value.
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	rc := g.raft.ReloadableConfig()
	rc.HeartbeatTimeout = g.heartbeat - time.Nanosecond
	if err := g.raft.ReloadConfig(rc); err != nil {
		g.log.Debug("could not stand at once; the heartbeat timeout will start the election", "err", err)
		return
	}
	rc.HeartbeatTimeout = g.heartbeat
	if err := g.raft.ReloadConfig(rc); err != nil {
		g.log.Warn("could not put the heartbeat timeout back", "err", err)
	}
}

// raftConfig is raft's configuration of the group, with timers t.
func raftConfig(cfg Config, t Timing, hl hclog.Logger) (*raft.Config, error) {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.HeartbeatTimeout = t.HeartbeatTimeout
	rc.ElectionTimeout = t.ElectionTimeout
	rc.LeaderLeaseTimeout = t.LeaderLeaseTimeout
	rc.CommitTimeout = t.CommitTimeout
	// The FSM is durable and skips entries at or below its own applied
	// index, so a restart must not rebuild it from the last snapshot.
	rc.NoSnapshotRestoreOnStart = true
	rc.SnapshotThreshold = DefaultSnapshots.Threshold
	rc.TrailingLogs = DefaultSnapshots.TrailingLogs
	rc.SnapshotInterval = DefaultSnapshots.Interval
	if cfg.Snapshots.Threshold > 0 {
		rc.SnapshotThreshold = cfg.Snapshots.Threshold
	}
	if cfg.Snapshots.TrailingLogs > 0 {
		rc.TrailingLogs = cfg.Snapshots.TrailingLogs
	}
	if cfg.Snapshots.Interval > 0 {
		rc.SnapshotInterval = cfg.Snapshots.Interval
	}
	rc.Logger = hl
	if err := raft.ValidateConfig(rc); err != nil {
		return nil, fmt.Errorf("shard %s: raft config: %w", cfg.Name, err)
	}
	return rc, nil
}

// logBackend is a group's log and stable store: a raft-boltdb file of its
// own, or its view of the node's shared log (nodelog.Log).
type logBackend interface {
	raft.LogStore
	raft.StableStore
	// FreeBytes records the free-page bytes of the file under its path.
	FreeBytes(into map[string]int64)
	Close() error
}

// boltBackend is a group's own raft-boltdb file.
type boltBackend struct {
	*raftboltdb.BoltStore
	path string
}

// FreeBytes adds the file's free-page bytes to into[path].
func (b boltBackend) FreeBytes(into map[string]int64) {
	into[b.path] += int64(b.Stats().FreeAlloc)
}

// openLog opens the group's log and stable store: cfg.Log when set, else
// raft.db in cfg.Dir, waiting at most timeout for its lock (the error then
// wraps bolt.ErrTimeout).
func openLog(cfg Config, timeout time.Duration) (logBackend, error) {
	if cfg.Log != nil {
		return cfg.Log, nil
	}
	path := filepath.Join(cfg.Dir, "raft.db")
	// Checked first: bbolt would panic past any recover on a damaged page
	// (internal/boltcheck).
	if err := boltcheck.Check(path); err != nil {
		return nil, fmt.Errorf("log store %s: %w", path, err)
	}
	s, err := raftboltdb.New(raftboltdb.Options{
		Path:   path,
		NoSync: faultLogNoSync(),
		BoltOptions: &bolt.Options{
			Timeout:        timeout,
			NoFreelistSync: true,
			FreelistType:   bolt.FreelistMapType,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("log store %s: %w", path, err)
	}
	return boltBackend{BoltStore: s, path: path}, nil
}

// openStores opens the group's log store (and its cache) and snapshot
// store in cfg.Dir.
func openStores(cfg Config, hl hclog.Logger) (logBackend, *raft.LogCache, raft.SnapshotStore, error) {
	logStore, err := openLog(cfg, 5*time.Second)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("shard %s: %w", cfg.Name, err)
	}
	cached, err := raft.NewLogCache(512, crashLogs(logStore))
	if err != nil {
		logStore.Close()
		return nil, nil, nil, err
	}
	// One snapshot is kept. For an FSM that snapshots by marker it is a few
	// bytes, or the last state a leader sent; the FSM's own file is the
	// durable state, so older snapshots have no use.
	files, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, 1, hl.Named("snapshots"))
	if err != nil {
		logStore.Close()
		return nil, nil, nil, fmt.Errorf("shard %s: snapshot store: %w", cfg.Name, err)
	}
	var snaps raft.SnapshotStore = files
	if src, ok := cfg.FSM.(StateSource); ok {
		snaps = &liveSnapshots{FileSnapshotStore: files, src: src}
	}
	return logStore, cached, snaps, nil
}

// FreeBytes adds to into, keyed by path, the bytes of free pages in each
// bbolt file the group holds open (its log store, and its state file when
// the FSM reports one): space the file holds that new writes reuse, so
// the storage alarm does not count it.
func (g *Group) FreeBytes(into map[string]int64) {
	g.logStore.FreeBytes(into)
	if f, ok := g.fsm.(interface{ FreeBytes(map[string]int64) }); ok {
		f.FreeBytes(into)
	}
}

// Bootstrap writes the initial configuration (every server a voter unless
// marked Nonvoter). It is a no-op (nil) when the
// group already has state, so a restarted node never bootstraps again.
func (g *Group) Bootstrap(servers []Server) error {
	cfg := raft.Configuration{}
	for _, s := range servers {
		cfg.Servers = append(cfg.Servers, s.raft())
	}
	err := g.raft.BootstrapCluster(cfg).Error()
	if errors.Is(err, raft.ErrCantBootstrap) {
		return nil
	}
	if err == nil {
		g.electIfSoleVoter()
	}
	return err
}

// soleVoter reports whether id is the only voter of c.
func soleVoter(c raft.Configuration, id string) bool {
	voters, self := 0, false
	for _, s := range c.Servers {
		if s.Suffrage == raft.Voter {
			voters++
			self = self || s.ID == raft.ServerID(id)
		}
	}
	return voters == 1 && self
}

// Name returns the group's name.
func (g *Group) Name() string { return g.name }

// Stopped reports whether the group's raft shut itself down while the
// group is open: a leader that committed a configuration without itself
// does (raft's ShutdownOnRemove), and then applies nothing more and
// answers no peer. Close does not count.
func (g *Group) Stopped() bool {
	select {
	case <-g.stop:
		return false
	default:
		return g.raft.State() == raft.Shutdown
	}
}

// IsLeader reports whether this node leads the group.
func (g *Group) IsLeader() bool { return g.raft.State() == raft.Leader }

// Leader returns the current leader's address and ID, empty if none known.
func (g *Group) Leader() (addr, id string) {
	a, i := g.raft.LeaderWithID()
	return string(a), string(i)
}

// WaitLeader blocks until the group has a leader (any node), or ctx ends.
func (g *Group) WaitLeader(ctx context.Context) error {
	return poll(ctx, func() bool { a, _ := g.raft.LeaderWithID(); return a != "" })
}

// DefaultApplyTimeout bounds an Apply whose context has no deadline.
const DefaultApplyTimeout = 10 * time.Second

// Apply proposes cmd and waits until it is committed and applied, returning
// the FSM's response and the entry's index. Raft errors become link
// sentinels: link.ErrNotLeader when this node does not lead (nothing was
// proposed), link.ErrUnavailable when the outcome is unknown or the group is
// shutting down. A business error returned by the FSM inside its response is
// left to the caller.
func (g *Group) Apply(ctx context.Context, cmd []byte) (any, uint64, error) {
	timeout := DefaultApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
		if timeout <= 0 {
			return nil, 0, fmt.Errorf("%w: %w", link.ErrUnavailable, context.DeadlineExceeded)
		}
	}
	start := time.Now()
	f := g.raft.Apply(cmd, timeout)
	resolved, err := await(ctx, f)
	if !resolved {
		return nil, 0, fmt.Errorf("%w: outcome unknown: %w", link.ErrUnavailable, err)
	}
	if err != nil {
		return nil, 0, translate(err)
	}
	// A commit means a quorum accepted this node as leader after start.
	g.noteQuorum(start)
	return f.Response(), f.Index(), nil
}

func translate(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		// Raft refused before proposing anything: safe to retry elsewhere.
		return fmt.Errorf("%w: %w", link.ErrNotLeader, err)
	case errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrRaftShutdown), errors.Is(err, raft.ErrEnqueueTimeout), errors.Is(err, raft.ErrAbortedByRestore):
		return fmt.Errorf("%w: %w", link.ErrUnavailable, err)
	}
	return fmt.Errorf("%w: %w", link.ErrUnavailable, err)
}

// TransferLeadership hands leadership of the group to another voter if this
// node leads it and has one; it waits at most until ctx ends.
func (g *Group) TransferLeadership(ctx context.Context, toID, toAddr string) error {
	if g.raft.State() != raft.Leader {
		return nil
	}
	// The target may lead (and commit) as soon as it hears from us,
	// without waiting for any voter's heartbeat timeout: no lease from here
	// on.
	g.resetLease()
	var f raft.Future
	if toID != "" {
		f = g.raft.LeadershipTransferToServer(raft.ServerID(toID), raft.ServerAddress(toAddr))
	} else {
		cf := g.raft.GetConfiguration()
		if err := cf.Error(); err != nil {
			return err
		}
		voters := 0
		for _, s := range cf.Configuration().Servers {
			if s.Suffrage == raft.Voter {
				voters++
			}
		}
		if voters < 2 {
			return nil
		}
		f = g.raft.LeadershipTransfer()
	}
	_, err := await(ctx, f)
	return err
}

// WaitFuture waits for a raft future, but no longer than ctx: a future of a
// group that lost its quorum or shut down mid-way may never resolve
// (hashicorp/raft#498). The future is left to finish on its own.
func WaitFuture(ctx context.Context, f raft.Future) error {
	resolved, err := await(ctx, f)
	if !resolved {
		return fmt.Errorf("%w: %w", link.ErrUnavailable, err)
	}
	return err
}

// await waits for f, but no longer than ctx. It reports whether f resolved
// (err is then f's error) or ctx ended first (err is ctx's); the one wait
// on a raft future in this package.
func await(ctx context.Context, f raft.Future) (resolved bool, err error) {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return true, err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// Close shuts the group down: raft first (waiting for it), then the
// transport, the log store and the FSM file.
func (g *Group) Close() error {
	g.closeOnce.Do(func() {
		close(g.stop)
		g.cancel()
		// An FSM waiting at an unknown command type or retrying a failed
		// commit holds raft's FSM goroutine: let it go first.
		if r, ok := g.fsm.(interface{ Release() }); ok {
			r.Release()
		}
		// Bounded: a raft goroutine stuck on a peer must not hold the
		// process past its shutdown budget.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		errs := []error{WaitFuture(ctx, g.raft.Shutdown())}
		cancel()
		g.wg.Wait()
		if q, ok := g.transport.(interface{ quiesce() }); ok {
			q.quiesce()
		}
		errs = append(errs, g.transport.Close())
		// Close does not let the transport's pooled connections to the
		// peers go (nor their handlers on the far side): a group that
		// leaves, or is reopened, would leave them open.
		if cs, ok := g.transport.(interface{ CloseStreams() }); ok {
			cs.CloseStreams()
		}
		errs = append(errs, g.logStore.Close(), g.fsm.Close())
		g.closeErr = errors.Join(errs...)
	})
	return g.closeErr
}
