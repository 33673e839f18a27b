package cluster

import (
	"context"
	"slices"
	"time"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/raftgroup"
	"github.com/linkraft/linkraft/shard"
)

// balanceLeaders moves one shard leadership away from this node when it
// leads more than its share (hashicorp/raft never rebalances by itself):
// the share is the shards divided by the live nodes hosting them, rounded
// up. The shard goes to the live voter leading the fewest, by what each
// node gossips it leads (a node knows the leaders of its own shards
// only). One move per round, and a shard moved is left alone for a while,
// so the cluster converges without a stampede or a shard passed back and
// forth on counts gossip has not yet updated. A node within its share
// makes room when an overloaded node leads one of its shards (see
// pickTransfer).
func (ll *leaderLoop) balanceLeaders(ctx context.Context) {
	n := ll.n
	shards := n.host.localShards()
	if n.gossip == nil {
		return
	}
	view := balanceView{self: n.cfg.NodeID, alive: map[string]bool{}, leads: map[string]int{}}
	for _, m := range n.gossip.members() {
		view.alive[m.ID] = m.Alive
		view.leads[m.ID] = m.Leads
	}
	local := map[string]int{}
	byID := map[command.ShardID]*shard.Shard{}
	for _, s := range shards {
		_, id := s.Group().Leader()
		if id == "" {
			return // an election is under way; look again next round
		}
		local[id]++
		byID[s.ID()] = s
		view.shards = append(view.shards, localShard{id: s.ID(), leader: id})
	}
	mine := local[n.cfg.NodeID]
	n.gossip.setLeads(mine)
	for id, k := range local {
		view.leads[id] = max(view.leads[id], k)
	}
	view.leads[n.cfg.NodeID] = mine
	p, err := n.meta.Placement()
	if err != nil || p == nil || mine == 0 {
		return
	}
	view.placement = p
	for i := range view.shards {
		if view.shards[i].leader != n.cfg.NodeID {
			continue
		}
		servers, err := byID[view.shards[i].id].Group().Servers()
		if err != nil {
			continue
		}
		view.shards[i].servers = servers
	}
	now := time.Now()
	view.allow = func(id command.ShardID) bool { return ll.transfers.allow(id, now) }
	id, to, share, ok := pickTransfer(view)
	if !ok {
		return
	}
	s := byID[id]
	tctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	err = s.Group().TransferLeadership(tctx, to.ID, to.Address)
	cancel()
	ll.transfers.hold(id, time.Now())
	if err != nil {
		n.log.Warn("leader balancing", "shard", id, "to", to.ID, "err", err, "retry_after", transferBackoff)
	} else {
		n.log.Info("shard leadership moved for balance", "shard", id, "to", to.ID, "leads", mine, "share", share)
	}
}

// localShard is a shard this node hosts, with its leader and, when this
// node leads it, its members.
type localShard struct {
	id      command.ShardID
	leader  string
	servers []raftgroup.Server
}

// balanceView is what a node knows when it balances leaderships.
type balanceView struct {
	self      string
	alive     map[string]bool
	leads     map[string]int // shards each node leads (gossip, and this node's own groups)
	placement *command.Placement
	shards    []localShard
	allow     func(command.ShardID) bool // the shard was not moved lately
}

// pickTransfer chooses the one leadership this node hands over, if any:
// one of the shards it leads, and the live placed voter of that shard
// leading the fewest. A node over its share moves a shard to a voter
// leading at least two fewer (and so no more than the share after it), so
// two nodes never pass a shard back and forth. That alone can stall: the
// overloaded node's voters may all be at their share while other nodes
// lead nothing. So a node within its share that hosts a shard an
// overloaded node leads makes room: it hands one of its own shards to a
// voter leading none, and the overloaded node can then move one to it.
func pickTransfer(v balanceView) (command.ShardID, raftgroup.Server, int, bool) {
	mine := v.leads[v.self]
	placed := map[string]bool{}
	for _, reps := range v.placement.Shards {
		for _, id := range reps {
			if v.alive[id] {
				placed[id] = true
			}
		}
	}
	if mine == 0 || len(placed) < 2 {
		return 0, raftgroup.Server{}, 0, false
	}
	share := (len(v.placement.Shards) + len(placed) - 1) / len(placed)
	makeRoom := false
	if mine <= share {
		for _, s := range v.shards {
			if s.leader != v.self && v.leads[s.leader] > share {
				makeRoom = true
			}
		}
		if !makeRoom {
			return 0, raftgroup.Server{}, share, false
		}
	}
	for _, s := range v.shards {
		if s.leader != v.self {
			continue
		}
		var to raftgroup.Server
		best := -1
		for _, srv := range s.servers {
			id := srv.ID
			if id == v.self || srv.Nonvoter || !v.alive[id] || !slices.Contains(v.placement.Shards[s.id], id) {
				continue
			}
			if best < 0 || v.leads[id] < best {
				to, best = srv, v.leads[id]
			}
		}
		switch {
		case best < 0:
			continue
		case makeRoom && best != 0:
			continue
		case !makeRoom && (best+2 > mine || best+1 > share):
			continue
		}
		if v.allow != nil && !v.allow(s.id) {
			continue
		}
		return s.id, to, share, true
	}
	return 0, raftgroup.Server{}, share, false
}

// transferBackoff is how long the balancer leaves a shard alone after a
// leadership transfer. After a failed one: a transfer that timed out
// usually means the target's replication is busy, and asking again at once
// only queues another request behind it. After one that worked: the lead
// counts gossip carries catch up first. 15 s outlasts the transport's 10 s I/O timeout, the
// longest one replication RPC can keep that goroutine busy. (A transfer cut
// short by a step-down cannot wedge the leader: the vendored raft carries
// that fix, third_party/hashicorp-raft/LINKRAFT.md.)
const transferBackoff = 15 * time.Second

// transferGate remembers balancing transfers per shard. It is used only
// from the leader loop's goroutine.
type transferGate struct {
	until map[command.ShardID]time.Time
}

// allow reports whether shard may be moved at now.
func (g *transferGate) allow(shard command.ShardID, now time.Time) bool {
	return !now.Before(g.until[shard])
}

// hold records a transfer of shard at now.
func (g *transferGate) hold(shard command.ShardID, now time.Time) {
	if g.until == nil {
		g.until = map[command.ShardID]time.Time{}
	}
	g.until[shard] = now.Add(transferBackoff)
}
