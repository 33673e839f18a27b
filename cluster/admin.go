package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/status"
	"github.com/linkraft/linkraft/link"
	"github.com/linkraft/linkraft/meta"
	"github.com/linkraft/linkraft/raftgroup"
)

// Admin is the node's operator role: the cluster as this node sees it,
// readiness, the leases and digests the chaos harness checks, and the
// removal of a node.
type Admin struct{ n *Node }

// Status reports the node, the meta group and every shard hosted here.
func (a *Admin) Status() status.Cluster {
	n := a.n
	st := status.Cluster{
		NodeID: n.cfg.NodeID, ClusterID: n.host.settings.ClusterID, CodeMode: n.host.settings.CodeMode,
		Nodes: a.nodes(), Storage: n.storage.get(),
		Meta:         groupStatus("meta", n.meta.Group(), n.meta.Health()),
		FeatureLevel: n.cfg.FeatureLevel, ClusterLevel: n.ClusterLevel(),
	}
	for _, s := range n.host.localShards() {
		info := groupStatus(s.ID().String(), s.Group(), s.Health())
		if c, err := s.Count(); err == nil {
			info.Links = &c
		}
		st.Shards = append(st.Shards, info)
	}
	return st
}

// groupStatus is g as this node sees it, with its apply health.
func groupStatus(id string, g *raftgroup.Group, h status.Health) status.Group {
	r := g.Info()
	_, leaderID := g.Leader()
	info := status.Group{
		ID: id, Leader: leaderID, State: r.State, Term: r.Term,
		AppliedIndex: r.AppliedIndex, CommitIndex: r.CommitIndex, LastIndex: r.LastIndex,
		LastContact: r.LastContact, Rejected: h.Rejected, Halted: h.Halted, Stalled: h.Stalled,
	}
	for _, s := range r.Servers {
		info.Replicas = append(info.Replicas, s.ID)
		if s.Nonvoter {
			info.Nonvoters = append(info.Nonvoters, s.ID)
		}
	}
	return info
}

// Ready returns nil when every group hosted here has a leader and this node
// has applied everything it knew to be committed when Ready was called;
// otherwise the reason, wrapping status.ErrNotReady. A group that is merely
// applying a fresh write is waited for (within ctx), so readiness does not
// flap under load; one still replaying its log after a restart makes the
// node not ready when ctx ends.
func (a *Admin) Ready(ctx context.Context) error {
	n := a.n
	check := func(name string, g *raftgroup.Group, h status.Health) error {
		if h.Halted != nil {
			return fmt.Errorf("%w: %s halted at index %d: %s", status.ErrNotReady, name, h.Halted.Index, h.Halted.Reason)
		}
		if s := h.Stalled; s != nil {
			return fmt.Errorf("%w: %s cannot commit index %d since %s (%d attempts): %s", status.ErrNotReady, name, s.Index, s.Since.Format(time.RFC3339), s.Attempts, s.Err)
		}
		if addr, _ := g.Leader(); addr == "" {
			return fmt.Errorf("%w: %s has no leader", status.ErrNotReady, name)
		}
		if err := g.WaitCaughtUp(ctx); err != nil {
			return fmt.Errorf("%w: %s is applying its log", status.ErrNotReady, name)
		}
		return nil
	}
	if r := n.admission.refusal(); r != "" {
		return fmt.Errorf("%w: %s", status.ErrNotReady, r)
	}
	if e := n.port.err.Load(); e != nil {
		return fmt.Errorf("%w: peer port stopped: %w", status.ErrNotReady, *e)
	}
	if err := check("meta", n.meta.Group(), n.meta.Health()); err != nil {
		return err
	}
	for _, s := range n.host.localShards() {
		if err := check("shard "+s.ID().String(), s.Group(), s.Health()); err != nil {
			return err
		}
	}
	return nil
}

// Starting says what Open is waiting for ("" before Open); a refusal or a
// join that reaches no one is part of it.
func (a *Admin) Starting() string {
	if r := a.n.admission.refusal(); r != "" {
		return r
	}
	return a.n.startup.get()
}

// PeerConnsRefused returns how many connections the peer port's limits
// have closed (0 before the port is open).
func (a *Admin) PeerConnsRefused() uint64 {
	if m := a.n.port.mux; m != nil {
		return m.Refused()
	}
	return 0
}

// Storage returns the last measurement of this node's storage.
func (a *Admin) Storage() status.Storage { return a.n.storage.get() }

// nodes lists the members: from gossip when it runs, with those the meta
// group knows but gossip does not reported as "unknown".
func (a *Admin) nodes() []status.Node {
	n := a.n
	self := status.Node{ID: n.cfg.NodeID, HTTPAddr: n.cfg.HTTPAddr, RaftAddr: n.port.mux.Addr(), GossipAddr: n.cfg.GossipAddr, Status: "alive"}
	if n.gossip == nil {
		return []status.Node{self}
	}
	self.GossipAddr = n.gossip.Addr()
	seen := map[string]bool{}
	var out []status.Node
	for _, m := range n.gossip.members() {
		st := "alive"
		if !m.Alive {
			st = "failed"
		}
		seen[m.ID] = true
		out = append(out, status.Node{ID: m.ID, HTTPAddr: m.HTTPAddr, RaftAddr: m.RaftAddr, GossipAddr: m.GossipAddr, Status: st, Level: m.Level})
	}
	if addrs, err := n.meta.Addresses(); err == nil {
		for id, addr := range addrs {
			if !seen[id] {
				out = append(out, status.Node{ID: id, RaftAddr: addr, Status: "unknown"})
			}
		}
	}
	if len(out) == 0 {
		out = []status.Node{self}
	}
	if p, err := n.meta.Placement(); err == nil && p != nil {
		for i := range out {
			nd := &out[i]
			nd.Draining = slices.Contains(p.Draining, nd.ID)
			for _, reps := range p.Shards {
				if slices.Contains(reps, nd.ID) {
					nd.Replicas++
				}
			}
		}
	}
	return out
}

// ForEachLink calls fn for every link stored in the shards hosted here,
// tombstones included, read from the bbolt files (not the cache), shard by
// shard in code order, until fn returns false.
func (a *Admin) ForEachLink(fn func(l *link.Link) bool) error {
	stop := false
	for _, s := range a.n.host.localShards() {
		if stop {
			break
		}
		err := s.Scan("", func(l *link.Link) bool {
			if !fn(l) {
				stop = true
			}
			return !stop
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Leases returns every ID range the meta group has granted, as this node's
// replica of it knows them (read it from the meta leader, or after the
// cluster has settled, for the complete list).
func (a *Admin) Leases() ([]status.Lease, error) { return a.n.meta.Leases() }

// Digests sums up this node's replica of the meta group and of every shard
// it hosts (GET /admin/v1/digest): replicas of a group at the same applied
// index must agree.
func (a *Admin) Digests() ([]status.Digest, error) {
	d, err := a.n.meta.Digest()
	if err != nil {
		return nil, err
	}
	out := []status.Digest{d}
	for _, s := range a.n.host.localShards() {
		d, err := s.Digest()
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// ApplyHealth sums the apply health of every group hosted here: entries
// rejected, groups halted, groups whose commit is being retried.
func (a *Admin) ApplyHealth() (rejected uint64, halted, stalled int) {
	hs := []status.Health{a.n.meta.Health()}
	for _, s := range a.n.host.localShards() {
		hs = append(hs, s.Health())
	}
	for _, h := range hs {
		rejected += h.Rejected
		if h.Halted != nil {
			halted++
		}
		if h.Stalled != nil {
			stalled++
		}
	}
	return rejected, halted, stalled
}

// RemoveNode is the operator's removal of a node (dead or alive): it is
// taken out of every shard's placement and recorded as removed, so leaders
// take it out of their Raft groups and never add it back; the meta leader
// gives the shards that lost a replica another node where one is free. A
// live node is best drained first (DrainNode), so that no shard runs a
// replica short while another catches up. It is idempotent and may run on
// any node (the placement is compare-and-set through the meta leader).
// status.ErrUnknownNode for an ID that is not a member.
func (a *Admin) RemoveNode(ctx context.Context, id string) error {
	err := a.changePlacement(ctx, func(cur *command.Placement, addrs map[string]string) (*command.Placement, error) {
		if slices.Contains(cur.Removed, id) {
			return nil, nil
		}
		if _, ok := addrs[id]; !ok && !meta.Placed(cur, id) {
			// A node the placement names but the meta group lost (a
			// recovery left it out) is removed all the same.
			return nil, fmt.Errorf("%w: %q", status.ErrUnknownNode, id)
		}
		return meta.Without(cur, id), nil
	})
	if err == nil {
		a.n.log.Info("node removed by operator", "member", id)
	}
	return err
}

// DrainNode starts (on) or calls off the draining of a node: the meta
// leader moves its replicas to other nodes one at a time (each caught up
// before the old one leaves) and places none on it, so that it can then
// be removed with every shard at full strength. Progress is the node's
// replica count in the status (DrainStatus). status.ErrUnknownNode for a
// stranger; status.ErrCannotDrain when the other nodes are fewer than the
// replication factor (add a node first).
func (a *Admin) DrainNode(ctx context.Context, id string, on bool) error {
	n := a.n
	if err := n.supports(levelMoves); err != nil {
		return err
	}
	s, err := n.meta.Settings()
	if err != nil {
		return err
	}
	if s == nil {
		return fmt.Errorf("%w: no cluster settings yet", link.ErrUnavailable)
	}
	err = a.changePlacement(ctx, func(cur *command.Placement, addrs map[string]string) (*command.Placement, error) {
		if _, ok := addrs[id]; (!ok && !meta.Placed(cur, id)) || slices.Contains(cur.Removed, id) {
			return nil, fmt.Errorf("%w: %q", status.ErrUnknownNode, id)
		}
		if slices.Contains(cur.Draining, id) == on {
			return nil, nil
		}
		next := &command.Placement{Version: cur.Version + 1, Shards: cur.Shards, Removed: cur.Removed, Moves: cur.Moves}
		if !on {
			next.Draining = slices.DeleteFunc(slices.Clone(cur.Draining), func(d string) bool { return d == id })
			return next, nil
		}
		others := 0
		for m := range addrs {
			if m != id && !slices.Contains(cur.Removed, m) && !slices.Contains(cur.Draining, m) {
				others++
			}
		}
		if others < int(s.ReplicationFactor) && meta.Placed(cur, id) {
			return nil, fmt.Errorf("%w: %s hosts replicas and the other nodes are %d, fewer than the replication factor %d: add a node first, then drain %s",
				status.ErrCannotDrain, id, others, s.ReplicationFactor, id)
		}
		next.Draining = append(slices.Clone(cur.Draining), id)
		return next, nil
	})
	if err == nil {
		n.log.Info("node drain by operator", "member", id, "draining", on)
	}
	return err
}

// DrainStatus reports whether node id is draining and how many replicas
// the placement still puts on it.
func (a *Admin) DrainStatus(id string) (draining bool, replicas int, err error) {
	p, addrs, err := a.n.meta.PlacementAndMembers()
	if err != nil || p == nil {
		return false, 0, err
	}
	if _, ok := addrs[id]; (!ok && !meta.Placed(p, id)) || slices.Contains(p.Removed, id) {
		return false, 0, fmt.Errorf("%w: %q", status.ErrUnknownNode, id)
	}
	for _, reps := range p.Shards {
		if slices.Contains(reps, id) {
			replicas++
		}
	}
	return slices.Contains(p.Draining, id), replicas, nil
}

// changePlacement writes the placement change returns for the current
// one (nil: nothing to change), through the meta leader, trying again
// while this node's copy was behind.
func (a *Admin) changePlacement(ctx context.Context, change func(cur *command.Placement, addrs map[string]string) (*command.Placement, error)) error {
	n := a.n
	ctx, cancel := withDefaultTimeout(ctx, 15*time.Second)
	defer cancel()
	for {
		cur, addrs, err := n.meta.PlacementAndMembers()
		if err != nil {
			return err
		}
		if cur == nil {
			return fmt.Errorf("%w: no placement yet", link.ErrUnavailable)
		}
		next, err := change(cur, addrs)
		if err != nil || next == nil {
			return err
		}
		_, err = n.router.apply(ctx, command.MetaGroup, (&command.SetPlacement{Placement: *next}).Encode(), 0)
		if !errors.Is(err, command.ErrStalePlacement) {
			return err
		}
		if err := pause(ctx); err != nil { // the local copy was behind: wait for it and try again
			return fmt.Errorf("%w: %w", link.ErrUnavailable, err)
		}
	}
}

// Placement returns the placement of shards on nodes, as this node's
// replica of the meta group has it (nil before the first).
func (a *Admin) Placement() (*command.Placement, error) { return a.n.meta.Placement() }
