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
// locally, forward to its leader over the peer protocol on ErrNotLeader,
// translate remote errors back into the same sentinels (package peer).

// router sends commands to their group's leader and reads to a replica or
// a leader (lookup.go), from any node.
type router struct {
	n *Node
	// hints sends writes to groups this node does not host straight to
	// their leader.
	hints leaderHints
}

// relayed reports a forwarded write this node passes on to another node.
func (r *router) relayed(group command.GroupID) {
	if s, ok := group.Shard(); ok && r.n.cfg.Observer != nil {
		r.n.cfg.Observer.Relayed(int(s))
	}
}

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
func (r *router) apply(ctx context.Context, group command.GroupID, cmd []byte, hops int) (*peer.ApplyResponse, error) {
	if err := command.Check(group.Kind(), cmd); err != nil {
		return nil, err
	}
	for {
		res, err := r.applyOnce(ctx, group, cmd, hops)
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
func (r *router) retryUnknown(ctx context.Context, group command.GroupID, cmd []byte) (*peer.ApplyResponse, error) {
	for {
		res, err := r.apply(ctx, group, cmd, 0)
		if err == nil || !errors.Is(err, link.ErrUnavailable) || ctx.Err() != nil {
			return res, err
		}
		r.n.log.Debug("outcome unknown; proposing the same entry again", "group", group, "command", command.Name(command.Type(cmd[0])), "err", err)
		if pause(ctx) != nil {
			return nil, err
		}
	}
}

func (r *router) applyOnce(ctx context.Context, group command.GroupID, cmd []byte, hops int) (*peer.ApplyResponse, error) {
	n := r.n
	g := n.host.group(group)
	if g != nil {
		if g.IsLeader() {
			if err := n.storage.refusal(n, group, cmd); err != nil {
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
			r.relayed(group)
		}
		return n.peers.Apply(ctx, addr, group, cmd, hops+1)
	}
	// Not hosted here: straight to the leader that applied the last write
	// this node sent to the group, in one hop, as Consul and rqlite
	// forward; else (or if that node was not reached or no longer leads)
	// through any replica, which forwards to its leader.
	if hops >= maxHops {
		return nil, link.ErrNotLeader
	}
	if hops > 0 {
		r.relayed(group)
	}
	if hint := r.hints.get(group); hint != "" && hops == 0 {
		res, err := n.peers.Apply(ctx, hint, group, cmd, hops+1)
		switch {
		case err == nil:
			r.rememberLeader(group, res.Leader)
			return res, nil
		case peer.NotDone(err) || errors.Is(err, link.ErrNotLeader):
			// Nothing was applied: forget the hint, ask the replicas.
			r.hints.set(group, "")
		case errors.Is(err, link.ErrUnavailable):
			r.hints.set(group, "")
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
		return n.peers.Apply(ctx, addr, group, cmd, hops+1)
	})
	if err == nil && hops == 0 {
		r.rememberLeader(group, res.Leader)
	}
	return res, err
}

// rememberLeader keeps addr as the leader hint of group if it is the peer
// address of a replica of the shard in this node's placement: an answer
// naming any other address (a peer's bug, or a hostile one) is not
// followed. An empty addr forgets the hint.
func (r *router) rememberLeader(group command.GroupID, addr string) {
	if addr != "" {
		s, _ := group.Shard()
		if addrs, err := r.n.meta.ReplicaAddrs(s, r.n.cfg.NodeID); err != nil || !slices.Contains(addrs, addr) {
			addr = ""
		}
	}
	r.hints.set(group, addr)
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
	addrs, err := n.meta.ReplicaAddrs(s, n.cfg.NodeID)
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
	case *command.RestoreResult:
		return &peer.ApplyResponse{Restore: r}, nil
	case *command.SettingsResult, *command.ClickBatchResult:
		return &peer.ApplyResponse{}, nil
	case *command.Rejection:
		return nil, r
	}
	return nil, fmt.Errorf("unexpected apply response %T", out)
}
