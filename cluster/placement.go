package cluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/idrange"
	"github.com/linkraft/linkraft/link"
	"github.com/linkraft/linkraft/raftgroup"
	"github.com/linkraft/linkraft/shard"
	"github.com/linkraft/linkraft/transport"
)

// Placement on this node: waiting for the settings and the placement the
// meta leader writes, opening and closing the shard groups placed here, and
// finding a local group or a member's peer address.

// waitSettings waits until the meta FSM holds the cluster settings and a
// placement (the meta leader writes them), then builds the ring and coder.
func (n *Node) waitSettings(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		s, err := n.metaFSM.Settings()
		if err != nil {
			return err
		}
		p, err := n.metaFSM.Placement()
		if err != nil {
			return err
		}
		if s != nil && p != nil {
			if int(s.Shards) != n.cfg.Shards {
				n.log.Warn("shard count is fixed at bootstrap; flag ignored", "stored", s.Shards, "flag", n.cfg.Shards)
			}
			if s.CodeMode != string(n.cfg.CodeMode) {
				n.log.Warn("code mode is fixed at bootstrap; flag ignored", "stored", s.CodeMode, "flag", n.cfg.CodeMode)
			}
			ring, err := NewRing(RingConfig{
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
			n.settings, n.ring, n.coder = s, ring, coder
			n.shardsMu.Lock()
			if n.shards.Load() == nil {
				shards := make([]*shard.Shard, s.Shards)
				n.shards.Store(&shards)
			}
			n.shardsMu.Unlock()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: no cluster settings from the meta group: %w: %w", link.ErrUnavailable, ctx.Err())
		case <-t.C:
		}
	}
}

// syncShards opens every shard the placement puts on this node that is not
// open yet. With the first placement (version 1) each placed node
// bootstraps the shard group with the identical configuration; later
// placements add replicas through the shard leader instead.
func (n *Node) syncShards() error {
	p, err := n.metaFSM.Placement()
	if err != nil || p == nil {
		return err
	}
	for i, nodes := range p.Shards {
		id := command.ShardID(i)
		if i >= int(n.settings.Shards) || !slices.Contains(nodes, n.cfg.NodeID) || n.localShard(id) != nil {
			continue
		}
		dir := n.groupDir("shards", id.String())
		n.faultBeforeShardOpen(dir, id, nodes[0] == n.cfg.NodeID)
		layer, err := n.mux.Layer(transport.KindRaft, uint64(id.Group()))
		if err != nil {
			return err
		}
		s, err := shard.Open(shard.Config{
			ID: id, NodeID: n.cfg.NodeID, Dir: dir,
			Stream: transport.RaftLayer{Layer: layer}, VerifyRPC: n.verifyRPC, Timing: n.cfg.Timing, Snapshots: n.cfg.Snapshots,
			CacheSize: n.cfg.CacheSize, CacheTTL: n.cfg.CacheTTL, NegativeTTL: n.cfg.NegativeTTL,
			Observer: n.cfg.Observer, Logger: n.log, OnChange: n.changed,
		})
		if err != nil {
			layer.Close()
			return fmt.Errorf("cluster: open shard %d (%s): %w. If its other replicas are healthy, stop this node, run `linknode repair-shard -data-dir %s %d` and start it again: it sets this replica's state aside and catches up from the leader",
				i, dir, err, n.cfg.DataDir, i)
		}
		n.shardsMu.Lock()
		shards := slices.Clone(*n.shards.Load())
		shards[i] = s
		n.shards.Store(&shards)
		n.shardsMu.Unlock()
		if p.Version == 1 && s.Group().LastIndex() == 0 {
			servers, err := n.serversFor(nodes)
			if err != nil {
				return fmt.Errorf("cluster: bootstrap shard %d: %w", i, err)
			}
			if err := s.Group().Bootstrap(servers); err != nil {
				return fmt.Errorf("cluster: bootstrap shard %d: %w", i, err)
			}
		}
		n.log.Info("shard opened", "shard", i, "replicas", nodes)
	}
	return nil
}

// serversFor maps node IDs to Raft servers with the addresses the meta
// group's configuration holds for them (every node is a meta member).
func (n *Node) serversFor(ids []string) ([]raftgroup.Server, error) {
	addrs, err := n.metaAddresses()
	if err != nil {
		return nil, err
	}
	var out []raftgroup.Server
	for _, id := range ids {
		a, ok := addrs[id]
		if !ok {
			return nil, fmt.Errorf("node %s is not in the meta group", id)
		}
		out = append(out, raftgroup.Server{ID: id, Address: a})
	}
	return out, nil
}

// metaAddresses returns node ID → peer address from the meta group's
// configuration.
func (n *Node) metaAddresses() (map[string]string, error) {
	servers, err := n.meta.Servers()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, s := range servers {
		out[s.ID] = s.Address
	}
	return out, nil
}

// placementLoop opens shards as the placement assigns them to this node.
func (n *Node) placementLoop() {
	defer n.bg.Done()
	n.every(n.cfg.ReconcileInterval/2, func() {
		if err := n.syncShards(); err != nil {
			n.log.Warn("opening placed shards", "err", err)
		}
	})
}

// localShard returns shard id if this node hosts it, else nil.
func (n *Node) localShard(id command.ShardID) *shard.Shard {
	p := n.shards.Load()
	if p == nil || id < 0 || int(id) >= len(*p) {
		return nil
	}
	return (*p)[id]
}

// localShards returns the shards hosted here.
func (n *Node) localShards() []*shard.Shard {
	p := n.shards.Load()
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

// localGroup returns the Raft group with the peer-port id, if hosted here.
func (n *Node) localGroup(id command.GroupID) *raftgroup.Group {
	s, ok := id.Shard()
	if !ok {
		return n.meta
	}
	if sh := n.localShard(s); sh != nil {
		return sh.Group()
	}
	return nil
}
