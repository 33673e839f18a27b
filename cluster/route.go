package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/link"
	"github.com/linkraft/linkraft/peer"
)

// Routing lives here, in one place (rqlite's proxy pattern): try the group
// locally, forward to its leader over the internal RPC on ErrNotLeader,
// translate remote errors back into the same sentinels.

// maxHops bounds forwarding: node → replica → leader.
const maxHops = 2

// retryPause is the wait before asking again when a group has no leader or
// the leader moved.
const retryPause = 25 * time.Millisecond

// pause waits retryPause, or returns ctx's error if ctx ends first.
func pause(ctx context.Context) error {
	t := time.NewTimer(retryPause)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// applyGroup runs cmd on the leader of group (0 = meta, s+1 = shard s):
// locally if this node leads it, otherwise forwarded to the leader, or to a
// replica when this node does not host the group. It retries while the
// group has no leader or the leader moves (nothing was proposed in those
// cases) until ctx ends. A business error of the FSM is returned as is; an
// unknown outcome (the leader failed mid-way, a forwarded call timed out) is
// link.ErrUnavailable.
//
// The command is decoded and validated first, by the same registry that
// apply uses (command.Check): nothing that apply would reject is proposed, and
// a forwarded command is checked again by the node that proposes it.
func (n *Node) applyGroup(ctx context.Context, group command.GroupID, cmd []byte, hops int) (*peer.ApplyResponse, error) {
	if err := command.Check(group.Kind(), cmd); err != nil {
		return nil, err
	}
	for {
		res, err := n.applyOnce(ctx, group, cmd, hops)
		// Only the node that took the request waits and retries; a node
		// serving a forwarded call answers at once and lets the caller
		// look for the leader again.
		if !errors.Is(err, link.ErrNotLeader) || hops > 0 {
			return res, err
		}
		if err := pause(ctx); err != nil {
			return nil, fmt.Errorf("%w: no leader for group %d: %w", link.ErrUnavailable, group, err)
		}
	}
}

// retryUnknown is applyGroup for a command that may be proposed again:
// while the outcome is unknown (link.ErrUnavailable: the leader failed
// mid-way, a forwarded call timed out) it sends the same entry again until
// it succeeds, fails otherwise, or ctx ends. Only commands that make a
// repeat harmless come here: a create or a visit grant carries its nonce, a
// batch its creates' nonces, and a lease is always a fresh range.
func (n *Node) retryUnknown(ctx context.Context, group command.GroupID, cmd []byte) (*peer.ApplyResponse, error) {
	for {
		r, err := n.applyGroup(ctx, group, cmd, 0)
		if err == nil || !errors.Is(err, link.ErrUnavailable) || ctx.Err() != nil {
			return r, err
		}
		n.log.Debug("outcome unknown; proposing the same entry again", "group", group, "command", command.Name(command.Type(cmd[0])), "err", err)
		if pause(ctx) != nil {
			return nil, err
		}
	}
}

func (n *Node) applyOnce(ctx context.Context, group command.GroupID, cmd []byte, hops int) (*peer.ApplyResponse, error) {
	g := n.localGroup(group)
	if g != nil {
		if g.IsLeader() {
			if err := n.storageRefusal(group, cmd); err != nil {
				return nil, err
			}
			start := time.Now()
			out, _, err := g.Apply(ctx, cmd)
			if err != nil {
				return nil, err
			}
			if s, ok := group.Shard(); ok && n.cfg.Observer != nil {
				n.cfg.Observer.Applied(int(s), time.Since(start))
			}
			res, err := resultOf(out)
			if res != nil {
				res.Leader, _ = g.Leader()
			}
			return res, err
		}
		addr, id := g.Leader()
		if addr == "" || id == n.cfg.NodeID {
			return nil, link.ErrNotLeader // no leader known yet
		}
		if hops >= maxHops {
			return nil, link.ErrNotLeader
		}
		if hops > 0 {
			n.relayed.Add(1)
		}
		return n.remoteApply(ctx, addr, group, cmd, hops)
	}
	// Not hosted here: straight to the leader that applied the last write
	// this node sent to the group, in one hop, as Consul and rqlite
	// forward; else (or if that node was not reached or no longer leads)
	// through any replica, which forwards to its leader.
	if hops >= maxHops {
		return nil, link.ErrNotLeader
	}
	if hops > 0 {
		n.relayed.Add(1)
	}
	if hint := n.leaderHints.get(group); hint != "" && hops == 0 {
		res, err := n.remoteApply(ctx, hint, group, cmd, hops)
		switch {
		case err == nil:
			n.rememberLeader(group, res.Leader)
			return res, nil
		case peer.NotDone(err) || errors.Is(err, link.ErrNotLeader):
			// Nothing was applied: forget the hint, ask the replicas.
			n.leaderHints.set(group, "")
		case errors.Is(err, link.ErrUnavailable):
			n.leaderHints.set(group, "")
			return nil, err // the outcome is unknown: the caller's to settle
		default:
			return nil, err // the leader's answer (a taken alias, ...)
		}
	}
	// Another replica is tried only when this one was never reached: any
	// later failure may have applied the command, and an update or delete
	// must not run twice.
	s, _ := group.Shard()
	res, err := askReplicas(n, s, link.ErrNotLeader, peer.NotDone, func(addr string) (*peer.ApplyResponse, error) {
		return n.remoteApply(ctx, addr, group, cmd, hops)
	})
	if err == nil && hops == 0 {
		n.rememberLeader(group, res.Leader)
	}
	return res, err
}

// rememberLeader keeps addr as the leader hint of group if it is the peer
// address of a replica of the shard in this node's placement: an answer
// naming any other address (a peer's bug, or a hostile one) is not
// followed. An empty addr forgets the hint.
func (n *Node) rememberLeader(group command.GroupID, addr string) {
	if addr != "" {
		s, _ := group.Shard()
		if addrs, err := n.replicaAddrs(s); err != nil || !slices.Contains(addrs, addr) {
			addr = ""
		}
	}
	n.leaderHints.set(group, addr)
}

// leaderHints remembers, per group this node does not host, the peer
// address of the leader that applied its last write there.
type leaderHints struct {
	mu   sync.Mutex
	addr map[command.GroupID]string
}

func (h *leaderHints) get(group command.GroupID) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.addr[group]
}

func (h *leaderHints) set(group command.GroupID, addr string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.addr == nil {
		h.addr = map[command.GroupID]string{}
	}
	if addr == "" {
		delete(h.addr, group)
	} else {
		h.addr[group] = addr
	}
}

// askReplicas calls ask with the peer address of each replica of shard s
// but this node, in placement order, until one answers: it moves on to the
// next only while next(err) says the last one did nothing. It returns the
// last error, or none when no replica is known.
func askReplicas[T any](n *Node, s command.ShardID, none error, next func(error) bool, ask func(addr string) (T, error)) (T, error) {
	var zero T
	addrs, err := n.replicaAddrs(s)
	if err != nil {
		return zero, err
	}
	last := none
	for _, a := range addrs {
		v, err := ask(a)
		if err == nil || !next(err) {
			return v, err
		}
		last = err
	}
	return zero, last
}

// unavailable is askReplicas' rule for reads: a replica that could not
// serve (unreachable, no leader, timed out) is passed over.
func unavailable(err error) bool { return errors.Is(err, link.ErrUnavailable) }

func (n *Node) remoteApply(ctx context.Context, addr string, group command.GroupID, cmd []byte, hops int) (*peer.ApplyResponse, error) {
	return n.peers.Apply(ctx, addr, group, cmd, hops+1)
}

// resultOf converts a local FSM response.
func resultOf(out any) (*peer.ApplyResponse, error) {
	switch r := out.(type) {
	case *command.LinkResult:
		if r.Err != nil {
			return nil, r.Err
		}
		return &peer.ApplyResponse{Link: r.Link}, nil
	case *command.LeaseResult:
		if r.Err != nil {
			return nil, r.Err
		}
		return &peer.ApplyResponse{LeaseStart: r.Start, LeaseEnd: r.End}, nil
	case *command.PlacementResult:
		return &peer.ApplyResponse{Placement: r.Placement}, r.Err
	case *command.KeyResult:
		return &peer.ApplyResponse{}, r.Err
	case *command.BatchResult:
		return &peer.ApplyResponse{Batch: r.Results}, nil
	case *command.ClaimResult:
		return &peer.ApplyResponse{Claim: r}, nil
	case *command.SettingsResult, *command.ClickBatchResult:
		return &peer.ApplyResponse{}, nil
	case *command.Rejection:
		return nil, r
	}
	return nil, fmt.Errorf("unexpected apply response %T", out)
}

// replicaAddrs returns the peer addresses of the nodes placed on shard s.
func (n *Node) replicaAddrs(s command.ShardID) ([]string, error) {
	p, err := n.metaFSM.Placement()
	if err != nil {
		return nil, err
	}
	if p == nil || s < 0 || int(s) >= len(p.Shards) {
		return nil, fmt.Errorf("%w: no placement for shard %d", link.ErrUnavailable, s)
	}
	addrs, err := n.metaAddresses()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, id := range p.Shards[s] {
		if a, ok := addrs[id]; ok && id != n.cfg.NodeID {
			out = append(out, a)
		}
	}
	return out, nil
}

// lookupShard finds code in shard s for the redirect path and the API.
//
//   - consistent: a linearizable read on the shard leader (forwarded there).
//   - otherwise, on a replica: the cache or the local bbolt file; a code the
//     replica does not have is asked of the leader, whose state includes
//     every acknowledged write (read-your-writes on every node). Only the
//     leader caches "unknown": a follower's negative entry could hide a
//     create that the leader acknowledged before the follower applied it.
//   - on a node without a replica: asked of a replica, which does the above.
//
// Tombstones are returned as links with Deleted set.
func (n *Node) lookupShard(ctx context.Context, s command.ShardID, code string, consistent bool, hops int) (*link.Link, error) {
	for {
		l, err := n.lookupOnce(ctx, s, code, consistent, hops)
		if !errors.Is(err, link.ErrNotLeader) || hops >= maxHops {
			return l, err
		}
		// Leadership moved under the read (an election, a hand-off, the
		// balancer): nothing was read; ask again.
		if err := pause(ctx); err != nil {
			return nil, fmt.Errorf("%w: shard %d: %w", link.ErrUnavailable, s, err)
		}
	}
}

func (n *Node) lookupOnce(ctx context.Context, s command.ShardID, code string, consistent bool, hops int) (*link.Link, error) {
	sh := n.localShard(s)
	if sh != nil {
		g := sh.Group()
		leader := g.IsLeader()
		if consistent {
			if leader {
				return sh.LookupConsistent(ctx, code)
			}
			if l, err, ok := faultStaleConsistent(sh, code); ok {
				return l, err
			}
		} else {
			ready := leader && g.LeaderReady()
			l, err := sh.Lookup(code, ready)
			if err == nil || !errors.Is(err, link.ErrNotFound) || faultFollowerRead() {
				return l, err
			}
			if leader {
				// A new leader may not have applied what its predecessor
				// acknowledged until its first barrier has; and a leader
				// that was paused or cut off may have been replaced by one
				// that committed the link. Its "unknown" is final only
				// once it has confirmed its leadership (lease or quorum
				// round).
				if !ready {
					if err := g.AwaitLeaderReady(ctx); err != nil {
						return nil, err // ErrNotLeader: the caller asks again
					}
					if l, err = sh.Lookup(code, true); !errors.Is(err, link.ErrNotFound) {
						return l, err
					}
				}
				if err := g.ConfirmLeader(ctx); err != nil {
					return nil, err // ErrNotLeader: the caller asks again
				}
				return nil, link.ErrNotFound
			}
		}
		if hops >= maxHops {
			return nil, link.ErrNotLeader
		}
		for {
			addr, id := g.Leader()
			if addr != "" && id != n.cfg.NodeID {
				return n.remoteLookup(ctx, addr, s, code, consistent, hops)
			}
			if g.IsLeader() {
				return n.lookupOnce(ctx, s, code, consistent, hops)
			}
			if err := pause(ctx); err != nil {
				return nil, fmt.Errorf("%w: shard %d has no leader: %w", link.ErrUnavailable, s, err)
			}
		}
	}
	if !consistent {
		if l, ok := n.remoteCached(code); ok {
			return l, nil
		}
	}
	none := fmt.Errorf("%w: no replica of shard %d reachable", link.ErrUnavailable, s)
	if hops >= maxHops {
		return nil, none
	}
	l, err := askReplicas(n, s, none, unavailable, func(addr string) (*link.Link, error) {
		return n.remoteLookup(ctx, addr, s, code, consistent, hops)
	})
	if err == nil {
		// Known links only: an "unknown" answer could hide a create
		// acknowledged a moment later.
		n.rememberRemote(l)
	}
	return l, err
}

func (n *Node) remoteLookup(ctx context.Context, addr string, s command.ShardID, code string, consistent bool, hops int) (*link.Link, error) {
	ctx, cancel := withDefaultTimeout(ctx, 5*time.Second)
	defer cancel()
	return n.peers.Lookup(ctx, addr, s, code, consistent, hops+1)
}
