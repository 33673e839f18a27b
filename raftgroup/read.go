package raftgroup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/link"
)

// The read path: when this node's state may answer a read. A leader that
// committed a barrier in its term holds every entry earlier leaders
// acknowledged (LeaderReady); a read on it is linearizable once a quorum
// confirms it still leads after the read point (VerifyRead); and its
// "unknown" is final only within its lease or after such a round
// (ConfirmLeader). The assumptions the lease rests on are stated at
// ConfirmLeader.

// monitorLeadership follows the reliable leadership channel. On gaining
// leadership it commits a barrier, so that everything of earlier terms is
// applied before the group serves consistent reads (Consul's
// establishLeadership step). A failed barrier is retried while this node
// still leads.
func (g *Group) monitorLeadership() {
	defer g.wg.Done()
	for {
		select {
		case <-g.stop:
			return
		case leader := <-g.notifyCh:
			g.barrierTerm.Store(0)
			g.resetLease()
			if !leader {
				g.log.Info("lost leadership")
				continue
			}
			g.log.Debug("gained leadership")
			g.establishLeadership()
		}
	}
}

func (g *Group) establishLeadership() {
	backoff := 50 * time.Millisecond
	for {
		if g.raft.State() != raft.Leader {
			return
		}
		term := g.raft.CurrentTerm()
		ctx, cancel := context.WithTimeout(g.ctx, 10*time.Second)
		start := time.Now()
		err := WaitFuture(ctx, g.raft.Barrier(10*time.Second))
		cancel()
		if err == nil && g.raft.State() == raft.Leader && g.raft.CurrentTerm() == term {
			g.noteQuorum(start)
			g.barrierTerm.Store(term)
			return
		}
		g.log.Warn("barrier after gaining leadership failed; retrying", "err", err)
		select {
		case <-g.stop:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// WaitReady blocks until this node leads the group and a barrier of the
// current term has applied, or ctx ends.
func (g *Group) WaitReady(ctx context.Context) error {
	return poll(ctx, g.leaderReady)
}

// AwaitLeaderReady waits until LeaderReady holds; it fails at once with
// link.ErrNotLeader if this node stops leading.
func (g *Group) AwaitLeaderReady(ctx context.Context) error {
	return pollUnless(ctx, g.leaderReady, func() bool { return g.raft.State() != raft.Leader })
}

// LeaderReady reports whether this node leads the group and a barrier of
// the current term has applied: its state then includes every entry any
// earlier leader acknowledged.
func (g *Group) LeaderReady() bool { return g.leaderReady() }

func (g *Group) leaderReady() bool {
	t := g.barrierTerm.Load()
	return t != 0 && t == g.raft.CurrentTerm() && g.raft.State() == raft.Leader
}

// CaughtUp reports whether the FSM has applied every entry this node knows
// to be committed, at this instant. Under writes it is false for the moment
// between an entry's commit and its apply; readiness uses WaitCaughtUp.
func (g *Group) CaughtUp() bool {
	return g.appliedThrough(g.raft.CommitIndex())
}

// WaitCaughtUp waits until the FSM has applied every entry that was known to
// be committed when it was called (rqlite's readyz "sync" rule). A group
// that keeps up with its writes returns at once or within an apply; one that
// is still applying its log after a restart, or cannot, runs into ctx and
// gets link.ErrUnavailable. Entries committed after the call do not move the
// target, so a steady stream of writes cannot keep it waiting.
func (g *Group) WaitCaughtUp(ctx context.Context) error {
	target := g.raft.CommitIndex()
	return poll(ctx, func() bool { return g.appliedThrough(target) })
}

// appliedThrough reports whether the FSM state includes every entry up to
// index. The FSM only sees command and configuration entries and records
// their index; no-op and barrier entries never reach it. So the question is
// whether the last FSM-visible entry at or below index is applied: walk the
// log back from index (usually one lookup in the log cache) to find it.
func (g *Group) appliedThrough(index uint64) bool {
	applied := g.fsm.AppliedIndex()
	for i := index; i > applied; i-- {
		var l raft.Log
		if err := g.logs.GetLog(i, &l); err != nil {
			// Compacted into a snapshot: everything at or below it was
			// in the FSM when the snapshot was taken.
			return true
		}
		if l.Type == raft.LogCommand || l.Type == raft.LogConfiguration {
			return false
		}
	}
	return true
}

func poll(ctx context.Context, cond func() bool) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", link.ErrUnavailable, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// DefaultReadTimeout bounds a VerifyRead whose context has no deadline.
const DefaultReadTimeout = 5 * time.Second

// VerifyRead makes the next local read linearizable (rqlite's recipe): this
// node must lead the group in a term whose barrier has applied (so every
// entry of earlier terms is in the FSM); the commit index is taken as the
// read point; a heartbeat round to a quorum confirms leadership after that
// (VerifyLeader); the term must not have changed meanwhile; and the FSM must
// have applied everything up to the read point. It returns link.ErrNotLeader
// when this node does not lead (or stops leading), link.ErrUnavailable on
// timeout.
func (g *Group) VerifyRead(ctx context.Context) error {
	_, err := g.ReadIndex(ctx)
	return err
}

// ReadIndex is VerifyRead that also returns its read point: a follower
// whose FSM has applied through it (WaitApplied) reads linearizably too
// (etcd's ReadIndex).
func (g *Group) ReadIndex(ctx context.Context) (uint64, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultReadTimeout)
		defer cancel()
	}
	notLeader := func() bool { return g.raft.State() != raft.Leader }
	if notLeader() {
		return 0, link.ErrNotLeader
	}
	// A new leader's barrier is usually one commit away.
	if err := pollUnless(ctx, g.leaderReady, notLeader); err != nil {
		return 0, err
	}
	term := g.raft.CurrentTerm()
	if g.barrierTerm.Load() != term {
		return 0, link.ErrNotLeader
	}
	readIndex := g.raft.CommitIndex()
	start := time.Now()
	resolved, err := await(ctx, g.raft.VerifyLeader())
	switch {
	case !resolved:
		return 0, fmt.Errorf("%w: %w", link.ErrUnavailable, err)
	case err != nil:
		// A read has no effect: whatever went wrong (leadership lost or
		// handed over mid-round), the caller may ask the leader again.
		return 0, fmt.Errorf("%w: %w", link.ErrNotLeader, err)
	}
	if g.raft.CurrentTerm() != term {
		return 0, link.ErrNotLeader
	}
	g.noteQuorum(start)
	return readIndex, poll(ctx, func() bool { return g.appliedThrough(readIndex) })
}

// WaitApplied waits until this replica has applied every entry through
// index (a leader's ReadIndex), or ctx ends.
func (g *Group) WaitApplied(ctx context.Context, index uint64) error {
	return poll(ctx, func() bool { return g.raft.CommitIndex() >= index && g.appliedThrough(index) })
}

// ConfirmLeader returns nil if this node leads the group, in a term whose
// barrier has applied, and no other node can have become leader since a
// quorum last confirmed it: within the leader lease (half the heartbeat
// timeout since the start of the last commit or VerifyLeader round), or
// else after a fresh VerifyLeader round. A leader must confirm before it
// answers "no such link" from its own state: a leader that was paused or cut
// off may not know yet that another node leads and has committed the link.
// It returns link.ErrNotLeader if this node does not (or no longer) lead,
// link.ErrUnavailable if the round does not finish before ctx ends.
//
// The lease rests on two assumptions, stated here for reviewers: voters
// that acknowledged this leader vote for nobody else until their own
// heartbeat timeout (hashicorp/raft's leader stickiness) — which a voter
// that crashes and restarts within the lease could break — and leadership
// transfers are begun only by the leader itself (TransferLeadership resets
// the lease first).
func (g *Group) ConfirmLeader(ctx context.Context) error {
	if !g.leaderReady() {
		return link.ErrNotLeader
	}
	if g.leaseValid() {
		return nil
	}
	term := g.raft.CurrentTerm()
	start := time.Now()
	if err := WaitFuture(ctx, g.raft.VerifyLeader()); err != nil {
		if errors.Is(err, link.ErrUnavailable) {
			return err // ctx ended
		}
		return fmt.Errorf("%w: %w", link.ErrNotLeader, err) // a read: ask again
	}
	if g.raft.CurrentTerm() != term || !g.leaderReady() {
		return link.ErrNotLeader
	}
	g.noteQuorum(start)
	return nil
}

func (g *Group) noteQuorum(start time.Time) {
	g.leaseMu.Lock()
	defer g.leaseMu.Unlock()
	if start.After(g.leaseReset) && start.After(g.quorumAt) {
		g.quorumAt = start
	}
}

func (g *Group) resetLease() {
	g.leaseMu.Lock()
	defer g.leaseMu.Unlock()
	g.quorumAt, g.leaseReset = time.Time{}, time.Now()
}

func (g *Group) leaseValid() bool {
	g.leaseMu.Lock()
	defer g.leaseMu.Unlock()
	return !g.quorumAt.IsZero() && time.Since(g.quorumAt) < g.lease
}

// pollUnless polls cond like poll, but fails with link.ErrNotLeader as soon
// as abort holds.
func pollUnless(ctx context.Context, cond, abort func() bool) error {
	var lost bool
	err := poll(ctx, func() bool {
		if abort() {
			lost = true
			return true
		}
		return cond()
	})
	if lost {
		return link.ErrNotLeader
	}
	return err
}
