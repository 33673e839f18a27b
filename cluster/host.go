package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/idrange"
	"github.com/linkraft/linkraft/link"
	"github.com/linkraft/linkraft/raftgroup"
	"github.com/linkraft/linkraft/shard"
	"github.com/linkraft/linkraft/transport"
)

// host is what this node hosts: the cluster settings it learnt from the
// meta group (and the ring and coder they make), and the shards the
// placement puts here, opened as it does.
type host struct {
	n *Node
	// settings, ring and coder are set once, in Open, before the node's
	// roles are handed out. The peer port serves before that: its
	// handlers look at shards, which is nil until then.
	settings *command.Settings
	ring     *shard.Ring
	coder    *idrange.Coder
	// shards is indexed by shard id, nil where not hosted here; replaced
	// whole (under mu) when a shard opens, so the redirect path reads it
	// with one atomic load.
	mu     sync.Mutex
	shards atomic.Pointer[[]*shard.Shard]
	// leaving holds the shards the placement no longer puts here (a
	// replica moved away, or this node drained or removed): no longer read
	// from; closed and their files deleted once they do not lead their
	// group (a leader hands over first). Under mu.
	leaving map[command.ShardID]*leavingShard
	// nLeaving is len(leaving), read without mu by group: the write
	// path of a node without a replica asks it for every forwarded write.
	nLeaving atomic.Int32
	// swept is the placement version whose unplaced shards' leftover
	// files were last looked for.
	swept atomic.Uint64
	// stopped holds, for each placed shard whose raft had shut itself
	// down (raftgroup.Group.Stopped), that replica and when sync first saw
	// it so. Only sync uses it (at Open, then on the loop).
	stopped map[command.ShardID]stoppedShard
}

// stoppedShard is a replica whose raft shut itself down, and when sync
// first saw it.
type stoppedShard struct {
	s     *shard.Shard
	since time.Time
}

// leavingShard is a replica on its way out.
type leavingShard struct {
	s     *shard.Shard
	since time.Time
}

// leaveTimeout bounds how long a leaving replica that leads its group
// waits to hand the leadership over before it is closed anyway.
const leaveTimeout = 30 * time.Second

// reopenAfter is how many reconcile intervals a placed replica whose raft
// shut itself down stays so before it is reopened: long enough for a
// placement that stops naming it (it leaves instead), short against the
// time without the replica.
const reopenAfter = 3

// waitSettings waits until the meta group holds the cluster settings and
// a placement (the meta leader writes them), then builds the ring and
// coder.
func (h *host) waitSettings(ctx context.Context) error {
	n := h.n
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		s, err := n.meta.Settings()
		if err != nil {
			return err
		}
		p, err := n.meta.Placement()
		if err != nil {
			return err
		}
		if s != nil && p != nil {
			return h.setSettings(s)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: no cluster settings from the meta group: %w: %w", link.ErrUnavailable, ctx.Err())
		case <-t.C:
		}
	}
}

func (h *host) setSettings(s *command.Settings) error {
	n := h.n
	if int(s.Shards) != n.cfg.Shards {
		n.log.Warn(fmt.Sprintf("-shards %d ignored: this cluster was made with %d, fixed at bootstrap; give -shards %d or drop it", n.cfg.Shards, s.Shards, s.Shards))
	}
	if s.CodeMode != string(n.cfg.CodeMode) {
		n.log.Warn(fmt.Sprintf("-code-mode %s ignored: this cluster was made with %s, fixed at bootstrap; give -code-mode %s or drop it", n.cfg.CodeMode, s.CodeMode, s.CodeMode))
	}
	ring, err := shard.NewRing(shard.RingConfig{
		Shards: int(s.Shards), PartitionCount: int(s.PartitionCount), Load: s.Load,
		VNodes: int(s.RingVNodes), Hasher: s.RingHasher,
	})
	if err != nil {
		return err
	}
	coder, err := idrange.NewCoder(idrange.Mode(s.CodeMode), s.CodeKey)
	if err != nil {
		return err
	}
	h.settings, h.ring, h.coder = s, ring, coder
	h.mu.Lock()
	if h.shards.Load() == nil {
		shards := make([]*shard.Shard, s.Shards)
		h.shards.Store(&shards)
	}
	h.mu.Unlock()
	return nil
}

// sync opens every shard the placement puts on this node that is not open
// yet. With the first placement (version 1) each placed node bootstraps
// the shard group with the identical configuration; later placements add
// replicas through the shard leader instead. A placed replica whose raft
// shut itself down is opened again (stoppedLong).
func (h *host) sync() error {
	n := h.n
	p, err := n.meta.Placement()
	if err != nil || p == nil {
		return err
	}
	sweep := h.swept.Load() != p.Version
	var opens []command.ShardID
	for i, nodes := range p.Shards {
		id := command.ShardID(i)
		if i >= int(h.settings.Shards) {
			continue
		}
		placed := slices.Contains(nodes, n.cfg.NodeID)
		switch s := h.local(id); {
		case placed && s == nil && h.leavingShard(id) == nil:
			opens = append(opens, id)
		case placed && s != nil && h.stoppedLong(id, s):
			h.unhost(id)
			if err := s.Close(); err != nil {
				n.log.Warn("closing a shard whose raft shut itself down", "shard", id, "err", err)
			}
			opens = append(opens, id)
		case !placed && s != nil:
			h.leave(id, s)
		case !placed && s == nil && sweep && h.leavingShard(id) == nil:
			if err := h.sweep(id); err != nil {
				return err
			}
		}
	}
	if err := h.openAll(opens, p); err != nil {
		return err
	}
	if sweep {
		h.swept.Store(p.Version)
	}
	return h.retire()
}

// openAll opens shards ids of placement p, as many at a time as the
// process has processors. Opening a shard reads its whole state file
// twice (internal/boltcheck's walk, then bbolt's rebuild of its freelist):
// seconds for a large one, and a node's start took their sum when they
// opened one by one. The error is the first shard's that failed; the
// others still open.
func (h *host) openAll(ids []command.ShardID, p *command.Placement) error {
	errs := make([]error, len(ids))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = h.open(id, p.Shards[id], p.Version == 1)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// sweep deletes the files of shard id, which is not placed here and not
// open: a replica that moved away while this node was down (its group took
// it out before the placement stopped naming it, so it is no member), found
// when the node starts with a placement that no longer names it.
func (h *host) sweep(id command.ShardID) error {
	n := h.n
	dir := n.groupDir("shards", id.String())
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("cluster: deleting shard %d, which moved away while this node was down: %w", id, err)
	}
	if err := n.dropGroupLog("shards", id.String()); err != nil {
		return fmt.Errorf("cluster: deleting the Raft log of shard %d, which moved away while this node was down: %w", id, err)
	}
	n.log.Info("shard moved away while this node was down; its files are deleted", "shard", id)
	return nil
}

// stoppedLong reports whether placed shard s's raft has shut itself down
// for reopenAfter reconcile intervals, as seen by sync. That happens to a
// leader that commits a configuration without itself while the placement
// still names it (JEPSEN.md, finding 8: raft's patch 4 closes the path
// seen, this any other): its group would apply nothing more here, and
// answer no peer, until the node restarts. Reopened, it starts from its
// files as a restart would, and its leader adds it back.
func (h *host) stoppedLong(id command.ShardID, s *shard.Shard) bool {
	if !s.Group().Stopped() {
		delete(h.stopped, id)
		return false
	}
	if h.stopped == nil {
		h.stopped = map[command.ShardID]stoppedShard{}
	}
	seen, ok := h.stopped[id]
	if !ok || seen.s != s { // first seen, or an earlier replica's entry
		h.stopped[id] = stoppedShard{s: s, since: time.Now()}
		h.n.log.Warn("the shard's raft shut itself down while the placement still puts it here; reopening it if it stays so", "shard", id)
		return false
	}
	if time.Since(seen.since) < reopenAfter*h.n.cfg.ReconcileInterval {
		return false
	}
	delete(h.stopped, id)
	h.n.log.Warn("reopening a shard whose raft shut itself down", "shard", id, "since", seen.since)
	return true
}

// unhost stops reading shard id here: lookups go to its replicas.
func (h *host) unhost(id command.ShardID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.unhostLocked(id)
}

// unhostLocked is unhost with h.mu held.
func (h *host) unhostLocked(id command.ShardID) {
	shards := slices.Clone(*h.shards.Load())
	shards[id] = nil
	h.shards.Store(&shards)
}

// leave stops reading shard id here (lookups go to its replicas) and
// keeps it running until its group lets it go.
func (h *host) leave(id command.ShardID, s *shard.Shard) {
	h.mu.Lock()
	h.unhostLocked(id)
	if h.leaving == nil {
		h.leaving = map[command.ShardID]*leavingShard{}
	}
	h.leaving[id] = &leavingShard{s: s, since: time.Now()}
	h.nLeaving.Store(int32(len(h.leaving)))
	h.mu.Unlock()
	h.n.log.Info("shard no longer placed here; leaving its group", "shard", id)
}

// retire closes the leaving shards that do not lead their group (or have
// waited leaveTimeout to hand over) and deletes their files: if the
// placement puts the shard here again, it joins afresh and catches up from
// its leader. Closing a follower at once is safe: a move takes its source
// out of the group before the placement stops naming it, and a node the
// operator removed is taken out as a dead one would be.
func (h *host) retire() error {
	n := h.n
	for _, ls := range h.leavingShards() {
		id := ls.s.ID()
		if ls.s.Group().IsLeader() && time.Since(ls.since) < leaveTimeout {
			continue
		}
		err := ls.s.Close()
		h.mu.Lock()
		delete(h.leaving, id)
		h.nLeaving.Store(int32(len(h.leaving)))
		h.mu.Unlock()
		if err != nil {
			n.log.Warn("closing a shard that left", "shard", id, "err", err)
		}
		if err := os.RemoveAll(n.groupDir("shards", id.String())); err != nil {
			return fmt.Errorf("cluster: deleting shard %d, which left this node: %w", id, err)
		}
		// After the directory: a crash between the two leaves a log
		// without one, which the next start drops (joinLogs).
		if err := n.dropGroupLog("shards", id.String()); err != nil {
			return fmt.Errorf("cluster: deleting the Raft log of shard %d, which left this node: %w", id, err)
		}
		n.log.Info("shard left this node; its files are deleted", "shard", id)
	}
	return nil
}

// leavingShard returns shard id if it is leaving this node, else nil.
func (h *host) leavingShard(id command.ShardID) *shard.Shard {
	if h.nLeaving.Load() == 0 {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if ls := h.leaving[id]; ls != nil {
		return ls.s
	}
	return nil
}

// leavingShards returns the shards leaving this node.
func (h *host) leavingShards() []*leavingShard {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*leavingShard, 0, len(h.leaving))
	for _, ls := range h.leaving {
		out = append(out, ls)
	}
	return out
}

// open opens shard id, placed on nodes; first says the placement is the
// first, whose nodes bootstrap the group.
func (h *host) open(id command.ShardID, nodes []string, first bool) error {
	n := h.n
	dir := n.groupDir("shards", id.String())
	n.faultBeforeShardOpen(dir, id, nodes[0] == n.cfg.NodeID)
	layer, err := n.port.mux.Layer(transport.KindRaft, uint64(id.Group()))
	if err != nil {
		return err
	}
	s, err := shard.Open(shard.Config{
		ID: id,
		Group: raftgroup.Config{NodeID: n.cfg.NodeID, Dir: dir, Log: n.groupLog("shards", id.String()), Stream: transport.RaftLayer{Layer: layer}, VerifyRPC: n.port.verifyRPC,
			Timing: n.cfg.Timing, Snapshots: n.cfg.Snapshots, Logger: n.log},
		CacheSize: n.cfg.CacheSize, CacheTTL: n.cfg.CacheTTL, NegativeTTL: n.cfg.NegativeTTL,
		Observer: n.cfg.Observer, OnChange: n.remote.changed, CommitInterval: max(n.cfg.StateCommitInterval, 0),
	})
	if err != nil {
		layer.Close()
		return fmt.Errorf("cluster: open shard %d (%s): %w. If its other replicas are healthy, stop this node, run `linknode repair-shard -data-dir %s %d` and start it again: it sets this replica's state aside and catches up from the leader",
			id, dir, err, n.cfg.DataDir, id)
	}
	h.mu.Lock()
	shards := slices.Clone(*h.shards.Load())
	shards[id] = s
	h.shards.Store(&shards)
	h.mu.Unlock()
	// A group with no state bootstraps when its placement is the first,
	// or when this node is its only replica: nothing else can start it
	// (after linknode repair-shard set a sole replica aside).
	if (first || (len(nodes) == 1 && nodes[0] == n.cfg.NodeID)) && s.Group().LastIndex() == 0 {
		servers, err := n.meta.Servers(nodes)
		if err == nil {
			err = s.Group().Bootstrap(servers)
		}
		if err != nil {
			return fmt.Errorf("cluster: bootstrap shard %d: %w", id, err)
		}
	}
	n.log.Debug("shard opened", "shard", id, "replicas", nodes)
	return nil
}

// loop opens shards as the placement assigns them to this node.
func (h *host) loop() {
	h.n.every(h.n.cfg.ReconcileInterval/2, func() {
		if err := h.sync(); err != nil {
			h.n.log.Warn("opening placed shards", "err", err)
		}
	})
}

// local returns shard id if this node hosts it, else nil.
func (h *host) local(id command.ShardID) *shard.Shard {
	p := h.shards.Load()
	if p == nil || id < 0 || int(id) >= len(*p) {
		return nil
	}
	return (*p)[id]
}

// localShards returns the shards hosted here.
func (h *host) localShards() []*shard.Shard {
	p := h.shards.Load()
	if p == nil {
		return nil
	}
	var out []*shard.Shard
	for _, s := range *p {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

// group returns the Raft group with id, if hosted here.
func (h *host) group(id command.GroupID) *raftgroup.Group {
	s, ok := id.Shard()
	if !ok {
		return h.n.meta.Group()
	}
	if sh := h.local(s); sh != nil {
		return sh.Group()
	}
	if sh := h.leavingShard(s); sh != nil && sh.Group().IsLeader() {
		// Still its leader until it hands over: writes reach it here. A
		// leaving follower's view of its group is no guide: the group may
		// have dropped it.
		return sh.Group()
	}
	return nil
}

// locate returns the shard of code.
func (h *host) locate(code string) command.ShardID { return h.ring.Locate(code) }

// close closes the shards hosted here and those leaving, in parallel.
func (h *host) close() []error {
	shards := h.localShards()
	for _, ls := range h.leavingShards() {
		shards = append(shards, ls.s)
	}
	errs := make([]error, len(shards))
	var wg sync.WaitGroup
	for i, s := range shards {
		wg.Go(func() { errs[i] = s.Close() })
	}
	wg.Wait()
	return []error{errors.Join(errs...)}
}
