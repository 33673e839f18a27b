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
// forth on counts gossip has not yet updated.
func (ll *leaderLoop) balanceLeaders(ctx context.Context) {
	n := ll.n
	shards := n.host.localShards()
	if n.gossip == nil {
		return
	}
	alive := map[string]bool{}
	leads := map[string]int{}
	for _, m := range n.gossip.members() {
		alive[m.ID] = m.Alive
		leads[m.ID] = m.Leads
	}
	local := map[string]int{}
	var mine []*shard.Shard
	for _, s := range shards {
		_, id := s.Group().Leader()
		if id == "" {
			return // an election is under way; look again next round
		}
		local[id]++
		if id == n.cfg.NodeID {
			mine = append(mine, s)
		}
	}
	n.gossip.setLeads(len(mine))
	for id, k := range local {
		leads[id] = max(leads[id], k)
	}
	leads[n.cfg.NodeID] = len(mine)
	p, err := n.meta.Placement()
	if err != nil || p == nil || len(mine) == 0 {
		return
	}
	placed := map[string]bool{}
	for _, reps := range p.Shards {
		for _, id := range reps {
			if alive[id] {
				placed[id] = true
			}
		}
	}
	if len(placed) < 2 {
		return
	}
	share := (len(p.Shards) + len(placed) - 1) / len(placed)
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
			if id == n.cfg.NodeID || srv.Nonvoter || !alive[id] || !slices.Contains(p.Shards[s.ID()], id) {
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
		ll.transfers.hold(s.ID(), time.Now())
		if err != nil {
			n.log.Warn("leader balancing", "shard", s.ID(), "to", to.ID, "err", err, "retry_after", transferBackoff)
		} else {
			n.log.Info("shard leadership moved for balance", "shard", s.ID(), "to", to.ID, "leads", len(mine), "share", share)
		}
		return
	}
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
