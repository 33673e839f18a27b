package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/idrange"
	"github.com/linkraft/linkraft/link"
	"github.com/linkraft/linkraft/raftgroup"
	"github.com/linkraft/linkraft/shard"
)

// leaderLoop is Consul's leader loop, for every group this node leads: on a
// timer and on gossip events, the meta leader reconciles the cluster
// settings, the meta membership and the placement, and each shard leader
// reconciles its group's membership with the placement. Gossip only
// proposes; Raft membership changes happen here, on a leader, and every
// future is waited on. Nodes are never removed for merely failing.
func (n *Node) leaderLoop() {
	defer n.bg.Done()
	t := time.NewTicker(n.cfg.ReconcileInterval)
	defer t.Stop()
	var events <-chan struct{}
	if n.gossip != nil {
		events = n.gossip.events
	}
	for {
		n.reconcile()
		select {
		case <-n.loops.Done():
			return
		case <-t.C:
		case <-events:
		}
	}
}

func (n *Node) reconcile() {
	ctx, cancel := context.WithTimeout(n.loops, 10*time.Second)
	defer cancel()
	if n.meta.IsLeader() {
		if err := n.meta.WaitReady(ctx); err == nil {
			if err := n.reconcileMeta(ctx); err != nil && n.loops.Err() == nil {
				n.log.Warn("meta reconcile", "err", err)
			}
		}
	}
	for _, s := range n.localShards() {
		if !s.Group().IsLeader() {
			continue
		}
		if err := n.reconcileShard(s); err != nil && n.loops.Err() == nil {
			n.log.Warn("shard reconcile", "shard", s.ID(), "err", err)
		}
	}
	n.balanceLeaders(ctx)
}

// balanceLeaders moves one shard leadership away from this node when it
// leads more than its share (hashicorp/raft never rebalances by itself):
// the share is the hosted shards divided by the live nodes hosting them,
// rounded up. The shard goes to the live replica leading the fewest. One
// move per round, so the cluster converges without a stampede.
func (n *Node) balanceLeaders(ctx context.Context) {
	shards := n.localShards()
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
	if p, err := n.metaFSM.Placement(); err == nil && p != nil {
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
		if !n.transfers.allow(s.ID(), time.Now()) {
			continue
		}
		tctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err = s.Group().TransferLeadership(tctx, to.ID, to.Address)
		cancel()
		if err != nil {
			n.transfers.failed(s.ID(), time.Now())
			n.log.Warn("leader balancing", "shard", s.ID(), "to", to.ID, "err", err, "retry_after", transferBackoff)
		} else {
			n.log.Info("shard leadership moved for balance", "shard", s.ID(), "to", to.ID, "leads", len(mine), "share", share)
		}
		return
	}
}

// reconcileMeta runs on the meta leader after its barrier.
func (n *Node) reconcileMeta(ctx context.Context) error {
	if err := n.ensureSettings(ctx); err != nil {
		return err
	}
	if err := n.ensureFirstKey(ctx); err != nil {
		return err
	}
	if err := n.reconcileMetaMembers(); err != nil {
		return err
	}
	return n.reconcilePlacement(ctx)
}

// ensureSettings writes the cluster settings once, from this node's flags.
func (n *Node) ensureSettings(ctx context.Context) error {
	s, err := n.metaFSM.Settings()
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
		PartitionCount:    DefaultPartitionCount,
		ReplicationFactor: uint32(n.cfg.ReplicationFactor),
		Load:              DefaultLoad,
		CodeMode:          string(n.cfg.CodeMode),
		CodeKey:           key,
		CreatedAt:         time.Now().UTC(),
		RingVNodes:        DefaultVNodes,
		RingHasher:        DefaultHasher,
	}
	if _, _, err := n.meta.Apply(ctx, (&command.SetSettings{Settings: want}).Encode()); err != nil {
		return err
	}
	n.log.Info("cluster settings written", "cluster_id", want.ClusterID, "shards", want.Shards, "code_mode", want.CodeMode)
	return nil
}

// reconcileMetaMembers adds every alive gossip member that is not in the
// meta group: as a voter while there are fewer than five, else as a
// non-voter.
func (n *Node) reconcileMetaMembers() error {
	if n.gossip == nil {
		return nil
	}
	servers, err := n.meta.Servers()
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
	p, err := n.metaFSM.Placement()
	if err != nil {
		return err
	}
	removed := map[string]bool{}
	if p != nil {
		for _, id := range p.Removed {
			removed[id] = true
		}
	}
	for id := range known {
		if removed[id] {
			if err := n.meta.Remove(n.loops, id); err != nil {
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
		err := n.admit(ctx, m)
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
				if err := n.updateAddress(n.meta, cur, m.RaftAddr); err != nil {
					return err
				}
			}
			continue
		}
		srv := raftgroup.Server{ID: m.ID, Address: m.RaftAddr, Nonvoter: voters >= maxMetaVoters}
		if err := n.meta.Add(n.loops, srv); err != nil {
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
func (n *Node) reconcilePlacement(ctx context.Context) error {
	s, err := n.metaFSM.Settings()
	if err != nil || s == nil {
		return err
	}
	cur, err := n.metaFSM.Placement()
	if err != nil {
		return err
	}
	addrs, err := n.metaAddresses()
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
	next := planPlacement(cur, nodes, int(s.Shards), int(s.ReplicationFactor))
	if next == nil {
		return nil
	}
	r, err := n.applyGroup(ctx, command.MetaGroup, (&command.SetPlacement{Placement: *next}).Encode(), 0)
	if err != nil {
		if errors.Is(err, command.ErrStalePlacement) {
			return nil // someone else changed it; the next round re-plans
		}
		return err
	}
	n.log.Info("placement written", "version", r.Placement.Version)
	return nil
}

// planPlacement returns the next placement, or nil if cur needs no change.
// The first placement puts shard i on nodes i, i+1, … (mod the node count),
// so shards and their first replicas spread evenly. Later, a shard with
// fewer replicas than wanted gets the least loaded nodes it lacks.
func planPlacement(cur *command.Placement, nodes []string, shards, replicas int) *command.Placement {
	if len(nodes) == 0 {
		return nil
	}
	want := min(replicas, len(nodes))
	if cur == nil {
		p := &command.Placement{Version: 1, Shards: make([][]string, shards)}
		for i := range p.Shards {
			for k := 0; k < want; k++ {
				p.Shards[i] = append(p.Shards[i], nodes[(i+k)%len(nodes)])
			}
		}
		return p
	}
	load := map[string]int{}
	for _, id := range nodes {
		load[id] = 0
	}
	for _, reps := range cur.Shards {
		for _, id := range reps {
			load[id]++
		}
	}
	next := &command.Placement{Version: cur.Version + 1, Shards: make([][]string, len(cur.Shards)), Removed: cur.Removed}
	changed := false
	for i, reps := range cur.Shards {
		next.Shards[i] = slices.Clone(reps)
		for len(next.Shards[i]) < want {
			best := ""
			for _, id := range nodes {
				if slices.Contains(next.Shards[i], id) {
					continue
				}
				if best == "" || load[id] < load[best] {
					best = id
				}
			}
			if best == "" {
				break
			}
			next.Shards[i] = append(next.Shards[i], best)
			load[best]++
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return next
}

// reconcileShard runs on a shard leader: every node the placement puts on
// the shard and the group lacks is added as a voter (Raft catches it up from
// the log or a snapshot). Removal is an operator action, never automatic.
func (n *Node) reconcileShard(s *shard.Shard) error {
	p, err := n.metaFSM.Placement()
	if err != nil || p == nil || int(s.ID()) >= len(p.Shards) {
		return err
	}
	current, err := s.Group().Servers()
	if err != nil {
		return err
	}
	have := map[string]bool{}
	addrs, err := n.metaAddresses()
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
			if err := n.updateAddress(s.Group(), srv, a); err != nil {
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
	servers, err := n.serversFor(missing)
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
func (n *Node) updateAddress(g *raftgroup.Group, cur raftgroup.Server, addr string) error {
	moved := cur
	moved.Address = addr
	if err := g.Add(n.loops, moved); err != nil {
		return err
	}
	n.log.Info("peer address updated", "member", cur.ID, "from", cur.Address, "to", addr)
	return nil
}

// ErrUnknownNode is returned by RemoveNode for an ID that is not a member.
var ErrUnknownNode = errors.New("unknown node")

// RemoveNode is the operator's removal of a node (dead or alive): it is
// taken out of every shard's placement and recorded as removed, so leaders
// take it out of their Raft groups and never add it back; the meta leader
// gives the shards that lost a replica another node where one is free. It
// is idempotent and may run on any node (the placement is compare-and-set
// through the meta leader).
func (n *Node) RemoveNode(ctx context.Context, id string) error {
	ctx, cancel := withDefaultTimeout(ctx, 15*time.Second)
	defer cancel()
	for {
		cur, err := n.metaFSM.Placement()
		if err != nil {
			return err
		}
		addrs, err := n.metaAddresses()
		if err != nil {
			return err
		}
		if cur == nil {
			return fmt.Errorf("%w: no placement yet", link.ErrUnavailable)
		}
		if slices.Contains(cur.Removed, id) {
			return nil
		}
		if _, ok := addrs[id]; !ok {
			return fmt.Errorf("%w: %q", ErrUnknownNode, id)
		}
		next := &command.Placement{Version: cur.Version + 1, Removed: append(slices.Clone(cur.Removed), id)}
		for _, reps := range cur.Shards {
			next.Shards = append(next.Shards, slices.DeleteFunc(slices.Clone(reps), func(r string) bool { return r == id }))
		}
		_, err = n.applyGroup(ctx, command.MetaGroup, (&command.SetPlacement{Placement: *next}).Encode(), 0)
		if err == nil {
			n.log.Info("node removed by operator", "member", id)
			return nil
		}
		if !errors.Is(err, command.ErrStalePlacement) {
			return err
		}
		if err := pause(ctx); err != nil { // the local copy was behind: wait for it and try again
			return fmt.Errorf("%w: %w", link.ErrUnavailable, err)
		}
	}
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
