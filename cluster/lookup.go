package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/link"
	"github.com/linkraft/linkraft/shard"
)

// The read path: a link for a redirect or the API, from this node's
// replica, its shard's leader, or a replica elsewhere; and reads that must
// run on a shard's leader (onLeader).

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
func (r *router) lookup(ctx context.Context, s command.ShardID, code string, consistent bool, hops int) (*link.Link, error) {
	for {
		l, err := r.lookupOnce(ctx, s, code, consistent, hops)
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

func (r *router) lookupOnce(ctx context.Context, s command.ShardID, code string, consistent bool, hops int) (*link.Link, error) {
	n := r.n
	sh := n.host.local(s)
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
				return r.remoteLookup(ctx, addr, s, code, consistent, hops)
			}
			if g.IsLeader() {
				return r.lookupOnce(ctx, s, code, consistent, hops)
			}
			if err := pause(ctx); err != nil {
				return nil, fmt.Errorf("%w: shard %d has no leader: %w", link.ErrUnavailable, s, err)
			}
		}
	}
	if !consistent {
		if l, ok := n.remote.get(code); ok {
			return l, nil
		}
	}
	none := fmt.Errorf("%w: no replica of shard %d reachable", link.ErrUnavailable, s)
	if hops >= maxHops {
		return nil, none
	}
	l, err := askReplicas(n, s, none, unavailable, func(addr string) (*link.Link, error) {
		return r.remoteLookup(ctx, addr, s, code, consistent, hops)
	})
	if err == nil {
		// Known links only: an "unknown" answer could hide a create
		// acknowledged a moment later.
		n.remote.remember(l)
	}
	return l, err
}

func (r *router) remoteLookup(ctx context.Context, addr string, s command.ShardID, code string, consistent bool, hops int) (*link.Link, error) {
	ctx, cancel := withDefaultTimeout(ctx, 5*time.Second)
	defer cancel()
	return r.n.peers.Lookup(ctx, addr, s, code, consistent, hops+1)
}

// onLeader runs read on shard s's leader after VerifyRead (a linearizable
// read): here if this node leads it, else through remote with the address
// of the leader or, from a node without a replica, of a replica (which
// forwards). It asks again while leadership moves; a forwarded call (hops
// > 0) answers link.ErrNotLeader instead, for its caller to ask again.
func onLeader[T any](ctx context.Context, n *Node, s command.ShardID, hops int, read func(*shard.Shard) (T, error), remote func(addr string) (T, error)) (T, error) {
	for {
		v, err := onLeaderOnce(ctx, n, s, hops, read, remote)
		if !errors.Is(err, link.ErrNotLeader) || hops > 0 {
			return v, err
		}
		if err := pause(ctx); err != nil {
			var zero T
			return zero, fmt.Errorf("%w: shard %d: %w", link.ErrUnavailable, s, err)
		}
	}
}

func onLeaderOnce[T any](ctx context.Context, n *Node, s command.ShardID, hops int, read func(*shard.Shard) (T, error), remote func(addr string) (T, error)) (T, error) {
	var zero T
	if sh := n.host.local(s); sh != nil {
		g := sh.Group()
		if g.IsLeader() {
			if err := g.VerifyRead(ctx); err != nil {
				return zero, err
			}
			return read(sh)
		}
		addr, id := g.Leader()
		if hops >= maxHops || addr == "" || id == n.cfg.NodeID {
			return zero, link.ErrNotLeader
		}
		return remote(addr)
	}
	none := fmt.Errorf("%w: no replica of shard %d reachable", link.ErrUnavailable, s)
	if hops >= maxHops {
		return zero, none
	}
	return askReplicas(n, s, none, unavailable, remote)
}
