package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
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
	}
	for _, s := range n.host.localShards() {
		if !s.Group().IsLeader() {
			continue
		}
		if err := ll.reconcileShard(s); err != nil && n.loops.Err() == nil {
			n.log.Warn("shard reconcile", "shard", s.ID(), "err", err)
		}
	}
	ll.balanceLeaders(ctx)
}

// balanceLeaders moves one shard leadership away from this node when it
// leads more than its share (hashicorp/raft never rebalances by itself):
// the share is the hosted shards divided by the live nodes hosting them,
// rounded up. The shard goes to the live replica leading the fewest. One
// move per round, so the cluster converges without a stampede.
func (ll *leaderLoop) balanceLeaders(ctx context.Context) {
	n := ll.n
	shards := n.host.localShards()
	if len(shards) == 0 || n.gossip == nil {
		return
	}
	alive := map[string]bool{}
	for _, m := range n.gossip.members() {
		alive[m.ID] = m.Alive
	}
	leads := map[string]int{}
	hosts := map[string]bool{}
	var mine []*shard.Shard
	for _, s := range shards {
		_, id := s.Group().Leader()
		if id == "" {
			return // an election is under way; look again next round
		}
		leads[id]++
		if id == n.cfg.NodeID {
			mine = append(mine, s)
		}
		servers, err := s.Group().Servers()
		if err != nil {
			return
		}
		for _, srv := range servers {
			if alive[srv.ID] {
				hosts[srv.ID] = true
			}
		}
	}
	if len(hosts) < 2 {
		return
	}
	// The share is the cluster's, not this node's view: every shard over
	// every live node that hosts shards, rounded up.
	total, live := len(shards), len(hosts)
	if p, err := n.meta.Placement(); err == nil && p != nil {
		total = len(p.Shards)
		placed := map[string]bool{}
		for _, reps := range p.Shards {
			for _, id := range reps {
				if alive[id] {
					placed[id] = true
				}
			}
		}
		if len(placed) > 0 {
			live = len(placed)
		}
	}
	share := (total + live - 1) / live
	if len(mine) <= share {
		return
	}
	for _, s := range mine {
		servers, err := s.Group().Servers()
		if err != nil {
			continue
		}
		var to raftgroup.Server
		best := -1
		for _, srv := range servers {
			id := srv.ID
			if id == n.cfg.NodeID || srv.Nonvoter || !alive[id] {
				continue
			}
			if best < 0 || leads[id] < best {
				to, best = srv, leads[id]
			}
		}
		// Move only to a node leading at least two fewer, so two nodes
		// never pass a shard back and forth.
		if best < 0 || best+2 > len(mine) || best+1 > share {
			continue
		}
		if !ll.transfers.allow(s.ID(), time.Now()) {
			continue
		}
		tctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err = s.Group().TransferLeadership(tctx, to.ID, to.Address)
		cancel()
		if err != nil {
			ll.transfers.failed(s.ID(), time.Now())
			n.log.Warn("leader balancing", "shard", s.ID(), "to", to.ID, "err", err, "retry_after", transferBackoff)
		} else {
			n.log.Info("shard leadership moved for balance", "shard", s.ID(), "to", to.ID, "leads", len(mine), "share", share)
		}
		return
	}
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
	return ll.reconcilePlacement(ctx)
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

// reconcilePlacement writes the first placement, and afterwards gives
// under-replicated shards replicas on the least loaded nodes. Nodes are the
// meta group's members.
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
	nodes := make([]string, 0, len(addrs))
	for id := range addrs {
		if cur == nil || !slices.Contains(cur.Removed, id) {
			nodes = append(nodes, id)
		}
	}
	sort.Strings(nodes)
	next := meta.PlanPlacement(cur, nodes, int(s.Shards), int(s.ReplicationFactor))
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
	n.log.Info("placement written", "version", r.Placement.Version)
	return nil
}

// reconcileShard runs on a shard leader: every node the placement puts on
// the shard and the group lacks is added as a voter (Raft catches it up from
// the log or a snapshot). Removal is an operator action, never automatic.
func (ll *leaderLoop) reconcileShard(s *shard.Shard) error {
	n := ll.n
	p, err := n.meta.Placement()
	if err != nil || p == nil || int(s.ID()) >= len(p.Shards) {
		return err
	}
	current, err := s.Group().Servers()
	if err != nil {
		return err
	}
	have := map[string]bool{}
	addrs, err := n.meta.Addresses()
	if err != nil {
		return err
	}
	for _, srv := range current {
		if slices.Contains(p.Removed, srv.ID) && !slices.Contains(p.Shards[s.ID()], srv.ID) {
			if err := s.Group().Remove(n.loops, srv.ID); err != nil {
				return err
			}
			n.log.Info("removed node taken out of shard", "shard", s.ID(), "member", srv.ID)
			continue
		}
		have[srv.ID] = true
		if a, ok := addrs[srv.ID]; ok && a != srv.Address {
			if err := ll.updateAddress(s.Group(), srv, a); err != nil {
				return err
			}
		}
	}
	var missing []string
	for _, id := range p.Shards[s.ID()] {
		if !have[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	servers, err := n.meta.Servers(missing)
	if err != nil {
		return err
	}
	for _, srv := range servers {
		if err := s.Group().Add(n.loops, srv); err != nil {
			return err
		}
		n.log.Info("replica added to shard", "shard", s.ID(), "member", srv.ID)
	}
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

// transferBackoff is how long the balancer leaves a shard alone after a
// failed leadership transfer: a transfer that timed out usually means the
// target's replication is busy, and asking again at once only queues another
// request behind it. 15 s outlasts the transport's 10 s I/O timeout, the
// longest one replication RPC can keep that goroutine busy. (A transfer cut
// short by a step-down cannot wedge the leader: the vendored raft carries
// that fix, third_party/hashicorp-raft/LINKRAFT.md.)
const transferBackoff = 15 * time.Second

// transferGate remembers failed balancing transfers per shard. It is used
// only from the leader loop's goroutine.
type transferGate struct {
	until map[command.ShardID]time.Time
}

// allow reports whether shard may be moved at now.
func (g *transferGate) allow(shard command.ShardID, now time.Time) bool {
	return !now.Before(g.until[shard])
}

// failed records a failed transfer of shard at now.
func (g *transferGate) failed(shard command.ShardID, now time.Time) {
	if g.until == nil {
		g.until = map[command.ShardID]time.Time{}
	}
	g.until[shard] = now.Add(transferBackoff)
}
