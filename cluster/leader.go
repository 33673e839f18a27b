package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/idrange"
	"github.com/linkraft/linkraft/meta"
	"github.com/linkraft/linkraft/raftgroup"
	"github.com/linkraft/linkraft/shard"
)

// leaderLoop is Consul's leader loop, for every group this node leads: on a
// timer and on gossip events, the meta leader reconciles the cluster
// settings, the first key, the meta membership and the placement, and each
// shard leader reconciles its group's membership with the placement and
// balances leaderships. Gossip only proposes; Raft membership changes
// happen here, on a leader, and every future is waited on. Nodes are never
// removed for merely failing.
type leaderLoop struct {
	n         *Node
	transfers transferGate // the balancing backoff
	// deadSince is when this node, as the meta leader, first saw each
	// member dead (Config.ReapAfter); reset when it stops leading.
	deadSince map[string]time.Time
	// allBorn: every shard's group has started (born); reset when this
	// node stops leading the meta group.
	allBorn bool
}

// run reconciles until the node's background loops stop.
func (ll *leaderLoop) run() {
	n := ll.n
	t := time.NewTicker(n.cfg.ReconcileInterval)
	defer t.Stop()
	var events <-chan struct{}
	if n.gossip != nil {
		events = n.gossip.events
	}
	for {
		ll.reconcile()
		select {
		case <-n.loops.Done():
			return
		case <-t.C:
		case <-events:
		}
	}
}

func (ll *leaderLoop) reconcile() {
	n := ll.n
	ctx, cancel := context.WithTimeout(n.loops, 10*time.Second)
	defer cancel()
	if g := n.meta.Group(); g.IsLeader() {
		if err := g.WaitReady(ctx); err == nil {
			if err := ll.reconcileMeta(ctx); err != nil && n.loops.Err() == nil {
				n.log.Warn("meta reconcile", "err", err)
			}
		}
	} else {
		ll.deadSince, ll.allBorn = nil, false
	}
	for _, s := range n.host.localShards() {
		if !s.Group().IsLeader() {
			continue
		}
		if err := ll.reconcileShard(ctx, s); err != nil && n.loops.Err() == nil {
			n.log.Warn("shard reconcile", "shard", s.ID(), "err", err)
		}
	}
	// A shard leaving this node that it still leads: another member
	// takes over, then takes this one out.
	for _, ls := range n.host.leavingShards() {
		if g := ls.s.Group(); g.IsLeader() {
			if err := ll.removeUnplaced(ctx, ls.s); err != nil && n.loops.Err() == nil {
				n.log.Warn("leaving shard", "shard", ls.s.ID(), "err", err)
			}
		}
	}
	ll.balanceLeaders(ctx)
}

// reconcileMeta runs on the meta leader after its barrier.
func (ll *leaderLoop) reconcileMeta(ctx context.Context) error {
	if err := ll.ensureSettings(ctx); err != nil {
		return err
	}
	if err := ll.n.keys.ensureFirstKey(ctx); err != nil {
		return err
	}
	if err := ll.reconcileMetaMembers(); err != nil {
		return err
	}
	if err := ll.reap(ctx); err != nil {
		return err
	}
	return ll.reconcilePlacement(ctx)
}

// reap removes, as linknode remove would, one node per round that this
// meta leader has seen dead (or not at all in gossip) for longer than
// Config.ReapAfter, while the live nodes are at least the replication
// factor, so that the shards it held get their replicas back elsewhere.
func (ll *leaderLoop) reap(ctx context.Context) error {
	n := ll.n
	if n.cfg.ReapAfter <= 0 || n.gossip == nil {
		return nil
	}
	s, err := n.meta.Settings()
	if err != nil || s == nil {
		return err
	}
	cur, addrs, err := n.meta.PlacementAndMembers()
	if err != nil || cur == nil {
		return err
	}
	now := time.Now()
	if ll.deadSince == nil {
		ll.deadSince = map[string]time.Time{}
	}
	alive := map[string]bool{n.cfg.NodeID: true}
	for _, m := range n.gossip.members() {
		if m.Alive {
			alive[m.ID] = true
		}
	}
	candidates := maps.Clone(addrs)
	for _, reps := range cur.Shards {
		for _, id := range reps {
			candidates[id] = ""
		}
	}
	live := 0
	for id := range candidates {
		switch {
		case slices.Contains(cur.Removed, id):
			delete(ll.deadSince, id)
		case alive[id]:
			delete(ll.deadSince, id)
			live++
		default:
			if _, ok := ll.deadSince[id]; !ok {
				ll.deadSince[id] = now
			}
		}
	}
	if live < int(s.ReplicationFactor) {
		return nil
	}
	for _, id := range slices.Sorted(maps.Keys(ll.deadSince)) {
		if now.Sub(ll.deadSince[id]) < n.cfg.ReapAfter {
			continue
		}
		if err := n.admin.RemoveNode(ctx, id); err != nil {
			return fmt.Errorf("reaping %s: %w", id, err)
		}
		n.log.Warn("dead node removed (-reap-after)", "member", id, "dead_for", now.Sub(ll.deadSince[id]).Round(time.Second))
		delete(ll.deadSince, id)
		return nil
	}
	return nil
}

// ensureSettings writes the cluster settings once, from this node's flags.
func (ll *leaderLoop) ensureSettings(ctx context.Context) error {
	n := ll.n
	s, err := n.meta.Settings()
	if err != nil || s != nil {
		return err
	}
	key := make([]byte, idrange.KeySize)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	var cid [8]byte
	if _, err := rand.Read(cid[:]); err != nil {
		return err
	}
	want := command.Settings{
		ClusterID:         hex.EncodeToString(cid[:]),
		Shards:            uint32(n.cfg.Shards),
		PartitionCount:    shard.DefaultPartitionCount,
		ReplicationFactor: uint32(n.cfg.ReplicationFactor),
		Load:              shard.DefaultLoad,
		CodeMode:          string(n.cfg.CodeMode),
		CodeKey:           key,
		CreatedAt:         time.Now().UTC(),
		RingVNodes:        shard.DefaultVNodes,
		RingHasher:        shard.DefaultHasher,
	}
	if _, _, err := n.meta.Group().Apply(ctx, (&command.SetSettings{Settings: want}).Encode()); err != nil {
		return err
	}
	n.log.Info("cluster settings written", "cluster_id", want.ClusterID, "shards", want.Shards, "code_mode", want.CodeMode)
	return nil
}

// reconcileMetaMembers adds every alive gossip member that is not in the
// meta group: as a voter while there are fewer than five, else as a
// non-voter.
func (ll *leaderLoop) reconcileMetaMembers() error {
	n := ll.n
	if n.gossip == nil {
		return nil
	}
	g := n.meta.Group()
	servers, err := g.Servers()
	if err != nil {
		return err
	}
	voters := 0
	known := map[string]raftgroup.Server{}
	for _, s := range servers {
		known[s.ID] = s
		if !s.Nonvoter {
			voters++
		}
	}
	removed, err := n.meta.Removed()
	if err != nil {
		return err
	}
	for id := range known {
		if removed[id] {
			if err := g.Remove(n.loops, id); err != nil {
				return err
			}
			n.log.Info("removed node taken out of the meta group", "member", id)
			delete(known, id)
		}
	}
	for _, m := range n.gossip.members() {
		if !m.Alive || removed[m.ID] {
			continue
		}
		ctx, cancel := context.WithTimeout(n.loops, 10*time.Second)
		err := n.admission.admit(ctx, m)
		cancel()
		if errors.Is(err, ErrRefused) {
			continue
		}
		if err != nil {
			return err
		}
		if cur, ok := known[m.ID]; ok {
			if cur.Address != m.RaftAddr {
				// The node came back on another address: re-adding the
				// same ID updates it (in this group; shard leaders do the
				// same for theirs).
				if err := ll.updateAddress(g, cur, m.RaftAddr); err != nil {
					return err
				}
			}
			continue
		}
		srv := raftgroup.Server{ID: m.ID, Address: m.RaftAddr, Nonvoter: voters >= maxMetaVoters}
		if err := g.Add(n.loops, srv); err != nil {
			return err
		}
		if !srv.Nonvoter {
			voters++
		}
		n.log.Info("node added to the meta group", "member", m.ID, "voter", !srv.Nonvoter)
	}
	return nil
}

// reconcilePlacement writes the first placement, and afterwards one step
// of meta.PlanPlacement: replicas for under-replicated shards, a move
// called off, or the next move (only once every member knows moves).
// Nodes are the meta group's members.
func (ll *leaderLoop) reconcilePlacement(ctx context.Context) error {
	n := ll.n
	s, err := n.meta.Settings()
	if err != nil || s == nil {
		return err
	}
	cur, addrs, err := n.meta.PlacementAndMembers()
	if err != nil {
		return err
	}
	in := meta.PlanInput{Shards: int(s.Shards), Replicas: int(s.ReplicationFactor)}
	in.Moves = n.supports(levelMoves) == nil && ll.born(ctx, cur, addrs)
	for id := range addrs {
		if cur == nil || !slices.Contains(cur.Removed, id) {
			in.Nodes = append(in.Nodes, id)
		}
	}
	sort.Strings(in.Nodes)
	if n.gossip != nil {
		in.Alive = map[string]bool{}
		for _, m := range n.gossip.members() {
			in.Alive[m.ID] = m.Alive
		}
		in.Alive[n.cfg.NodeID] = true
	}
	next := meta.PlanPlacement(cur, in)
	if next == nil {
		return nil
	}
	r, err := n.router.apply(ctx, command.MetaGroup, (&command.SetPlacement{Placement: *next}).Encode(), 0)
	if err != nil {
		if errors.Is(err, command.ErrStalePlacement) {
			return nil // someone else changed it; the next round re-plans
		}
		return err
	}
	switch {
	case cur != nil && len(next.Moves) > len(cur.Moves):
		m := next.Moves[0]
		n.log.Info("moving a replica", "shard", m.Shard, "from", m.From, "to", m.To, "version", r.Placement.Version)
	case cur != nil && len(next.Moves) < len(cur.Moves):
		m := cur.Moves[0]
		n.log.Warn("replica move called off: its target is down", "shard", m.Shard, "from", m.From, "to", m.To)
	default:
		n.log.Info("placement written", "version", r.Placement.Version)
	}
	return nil
}

// born reports whether every shard's group has started: some replica the
// placement names has applied an entry. Until then nothing moves: the
// nodes of the first placement bootstrap each group only when they open it
// under that placement (a node opening a shard under a later one waits to
// be added), so a move planned before they have would leave a group that
// nobody starts. Once true it stays true, and is remembered while this
// node leads the meta group.
func (ll *leaderLoop) born(ctx context.Context, p *command.Placement, addrs map[string]string) bool {
	if ll.allBorn || p == nil {
		return ll.allBorn
	}
	n := ll.n
	for i, reps := range p.Shards {
		id := command.ShardID(i)
		started := false
		for _, r := range reps {
			var applied uint64
			if r == n.cfg.NodeID {
				if g := n.host.group(id.Group()); g != nil {
					applied = g.AppliedIndex()
				}
			} else if addr, ok := addrs[r]; ok {
				cctx, cancel := context.WithTimeout(ctx, time.Second)
				applied, _ = n.peers.Applied(cctx, addr, id.Group())
				cancel()
			}
			if started = applied > 0; started {
				break
			}
		}
		if !started {
			return false
		}
	}
	ll.allBorn = true
	return true
}

// catchUpSlack is how far behind its leader's commit index a joining
// non-voter may be when it is promoted (Consul's autopilot allows 250
// trailing entries): entries keep coming under writes, and the last few
// reach it within a heartbeat.
const catchUpSlack = 250

// reconcileShard runs on a shard leader and makes the group's membership
// what the placement says:
//   - a node placed on the shard and missing from the group is added: as
//     a non-voter when it is a move's target (it votes once it has caught
//     up), else as a voter (Raft catches it up from the log or a
//     snapshot);
//   - a placed non-voter that has caught up is promoted, and a move whose
//     target votes is finished in the placement (its source no longer
//     named);
//   - a member the placement no longer names is removed, once a read of
//     the meta group through its leader confirms it: a lagging meta
//     replica must never take out a replica a newer placement added. This
//     leader removes itself last, after handing its leadership over.
func (ll *leaderLoop) reconcileShard(ctx context.Context, s *shard.Shard) error {
	n := ll.n
	p, err := n.meta.Placement()
	if err != nil || p == nil || int(s.ID()) >= len(p.Shards) {
		return err
	}
	g := s.Group()
	current, err := g.Servers()
	if err != nil {
		return err
	}
	addrs, err := n.meta.Addresses()
	if err != nil {
		return err
	}
	placed := p.Shards[s.ID()]
	have := map[string]raftgroup.Server{}
	stale := false
	for _, srv := range current {
		if !slices.Contains(placed, srv.ID) {
			stale = true
			continue
		}
		have[srv.ID] = srv
		if a, ok := addrs[srv.ID]; ok && a != srv.Address {
			if err := ll.updateAddress(g, srv, a); err != nil {
				return err
			}
		}
	}
	if stale {
		if err := ll.removeUnplaced(ctx, s); err != nil {
			return err
		}
	}
	move, moving := p.MoveOf(s.ID())
	// A move whose target votes takes its source out of the group before
	// the placement stops naming it, so that a source that sees itself
	// unplaced knows it is out: it may close at once.
	finishing := false
	if moving {
		to, ok := have[move.To]
		finishing = ok && !to.Nonvoter
	}
	var missing []string
	for _, id := range placed {
		if _, ok := have[id]; !ok && !(finishing && id == move.From) {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		servers, err := n.meta.Servers(missing)
		if err != nil {
			return err
		}
		for _, srv := range servers {
			srv.Nonvoter = moving && srv.ID == move.To
			if err := g.Add(n.loops, srv); err != nil {
				return err
			}
			have[srv.ID] = srv
			n.log.Info("replica added to shard", "shard", s.ID(), "member", srv.ID, "voter", !srv.Nonvoter)
		}
	}
	for _, id := range placed {
		srv, ok := have[id]
		if !ok || !srv.Nonvoter {
			continue
		}
		if ok, err := ll.caughtUp(ctx, g, s.ID(), srv); err != nil || !ok {
			if err != nil {
				n.log.Debug("joining replica's progress", "shard", s.ID(), "member", id, "err", err)
			}
			continue
		}
		srv.Nonvoter = false
		if err := g.Add(n.loops, srv); err != nil {
			return err
		}
		have[id] = srv
		n.log.Info("joining replica caught up; it votes now", "shard", s.ID(), "member", id)
		if moving && id == move.To {
			finishing = true
		}
	}
	if !finishing {
		return nil
	}
	if move.From == n.cfg.NodeID {
		return ll.handOver(ctx, s.ID(), g, placed, move.From)
	}
	if _, ok := have[move.From]; ok {
		if err := g.Remove(n.loops, move.From); err != nil {
			return err
		}
		n.log.Info("replica taken out of shard", "shard", s.ID(), "member", move.From)
	}
	return ll.finishMove(ctx, p, s.ID())
}

// caughtUp reports whether srv's replica of shard has applied to within
// catchUpSlack of this leader's commit index.
func (ll *leaderLoop) caughtUp(ctx context.Context, g *raftgroup.Group, shardID command.ShardID, srv raftgroup.Server) (bool, error) {
	commit := g.Info().CommitIndex
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	applied, err := ll.n.peers.Applied(cctx, srv.Address, shardID.Group())
	if err != nil {
		return false, err
	}
	return applied > 0 && applied+catchUpSlack >= commit, nil
}

// finishMove writes the placement without shard's move and its source.
func (ll *leaderLoop) finishMove(ctx context.Context, p *command.Placement, shardID command.ShardID) error {
	next := meta.FinishMove(p, shardID)
	if next == nil {
		return nil
	}
	m, _ := p.MoveOf(shardID)
	_, err := ll.n.router.apply(ctx, command.MetaGroup, (&command.SetPlacement{Placement: *next}).Encode(), 0)
	if errors.Is(err, command.ErrStalePlacement) {
		return nil // the next round looks again
	}
	if err == nil {
		ll.n.log.Info("replica moved", "shard", shardID, "from", m.From, "to", m.To)
	}
	return err
}

// removeUnplaced takes the members the placement does not name out of
// shard s's group, after confirming the placement with the meta leader.
// When this leader is one of them, it hands its leadership to a voter
// that stays; that voter's next round removes it.
func (ll *leaderLoop) removeUnplaced(ctx context.Context, s *shard.Shard) error {
	n := ll.n
	if err := n.metaReadPoint(ctx); err != nil {
		return err
	}
	p, err := n.meta.Placement()
	if err != nil || p == nil {
		return err
	}
	placed := p.Shards[s.ID()]
	g := s.Group()
	current, err := g.Servers()
	if err != nil {
		return err
	}
	self := false
	for _, srv := range current {
		switch {
		case slices.Contains(placed, srv.ID):
		case srv.ID == n.cfg.NodeID:
			self = true
		default:
			if err := g.Remove(n.loops, srv.ID); err != nil {
				return err
			}
			n.log.Info("replica taken out of shard", "shard", s.ID(), "member", srv.ID)
		}
	}
	if self {
		return ll.handOver(ctx, s.ID(), g, placed, n.cfg.NodeID)
	}
	return nil
}

// handOver moves the leadership of a group this node is leaving to a
// placed voter other than leaving; if none takes it and this node is not
// placed, it removes itself (raft commits the change, then steps down).
func (ll *leaderLoop) handOver(ctx context.Context, shardID command.ShardID, g *raftgroup.Group, placed []string, leaving string) error {
	n := ll.n
	servers, err := g.Servers()
	if err != nil {
		return err
	}
	for _, srv := range servers {
		if srv.Nonvoter || srv.ID == leaving || srv.ID == n.cfg.NodeID || !slices.Contains(placed, srv.ID) {
			continue
		}
		tctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := g.TransferLeadership(tctx, srv.ID, srv.Address)
		cancel()
		if err == nil {
			n.log.Info("shard leadership handed over before leaving", "shard", shardID, "to", srv.ID)
			return nil
		}
	}
	if slices.Contains(placed, n.cfg.NodeID) {
		return fmt.Errorf("no voter took the leadership of shard %d", shardID)
	}
	if err := g.Remove(n.loops, n.cfg.NodeID); err != nil {
		return err
	}
	n.log.Info("left shard as its leader", "shard", shardID)
	return nil
}

// updateAddress re-adds a server under its new address, keeping its
// suffrage.
func (ll *leaderLoop) updateAddress(g *raftgroup.Group, cur raftgroup.Server, addr string) error {
	moved := cur
	moved.Address = addr
	if err := g.Add(ll.n.loops, moved); err != nil {
		return err
	}
	ll.n.log.Info("peer address updated", "member", cur.ID, "from", cur.Address, "to", addr)
	return nil
}
