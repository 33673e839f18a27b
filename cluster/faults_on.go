//go:build jepsenbugs

package cluster

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/bugs"
	"github.com/linkraft/linkraft/link"
	"github.com/linkraft/linkraft/shard"
)

// The cluster's deliberate faults of the chaos harness (package
// internal/bugs), compiled only into jepsenbugs builds; faults_off.go is
// the normal build's no-op twin. Each is caught by one checker of the
// harness (JEPSEN.md).

// faultEarlyAck (early-ack): a create whose outcome is unknown is
// acknowledged anyway. It reports whether it answered.
func (n *Node) faultEarlyAck(ctx context.Context, group command.GroupID, data []byte, cmd *command.CreateIfAbsent) (*link.Link, error, bool) {
	if !bugs.On(bugs.EarlyAck) {
		return nil, nil, false
	}
	r, err := n.router.apply(ctx, group, data, 0)
	if errors.Is(err, link.ErrUnavailable) {
		return cmd.NewLink(0), nil, true
	}
	if err != nil {
		return nil, err, true
	}
	return r.Link, nil, true
}

// faultLoseAnswer (retry-new-code): the answer to every fifth generated
// create "got lost", and the create is retried under a fresh code and
// nonce, so the first link stays stored. It reports a retry.
func faultLoseAnswer(err error, cmd *command.CreateIfAbsent) bool {
	if err != nil || !bugs.Every(bugs.RetryNewCode, 5) {
		return false
	}
	cmd.Nonce = newNonce()
	return true
}

// faultSubmitClicks: every third batch is reported committed without being
// proposed (drop-click-batch), or every batch is applied twice under
// another node's name (click-double). It reports whether it submitted.
func (n *Node) faultSubmitClicks(ctx context.Context, s command.ShardID, b *command.ClickBatch) (error, bool) {
	switch {
	case bugs.Every(bugs.DropClickBatch, 3):
		return nil, true
	case bugs.On(bugs.ClickDouble):
		if _, err := n.router.apply(ctx, s.Group(), b.Encode(), 0); err != nil {
			return err, true
		}
		dup := *b
		dup.Node += "#dup"
		_, err := n.router.apply(ctx, s.Group(), dup.Encode(), 0)
		return err, true
	}
	return nil, false
}

// faultStaleConsistent (stale-consistent): a consistent read on a replica
// that does not lead is answered from its own state.
func faultStaleConsistent(sh *shard.Shard, code string) (*link.Link, error, bool) {
	if !bugs.On(bugs.StaleConsistent) {
		return nil, nil, false
	}
	l, err := sh.Read(code)
	return l, err, true
}

// faultFollowerRead (follower-read): a replica answers its own miss with
// 404 without asking the leader.
func faultFollowerRead() bool { return bugs.On(bugs.FollowerRead) }

// leaseless is no-lease's node-local ID counter.
var leaseless atomic.Uint64

// faultNoLease (no-lease): IDs come from a node-local counter, not a lease.
func faultNoLease(count uint64) (uint64, uint64, bool) {
	if !bugs.On(bugs.NoLease) {
		return 0, 0, false
	}
	start := leaseless.Add(count) - count
	return start, start + count, true
}

// faultNoInvalidate (no-invalidate): changed links are neither evicted
// from the remote cache nor announced.
func faultNoInvalidate() bool { return bugs.On(bugs.NoInvalidate) }

// faultBeforeShardOpen (lose-last-apply-on-restart): every replica undoes
// its last link write before it opens the shard, the first in the
// placement the one before too, so the replicas differ.
func (n *Node) faultBeforeShardOpen(dir string, s command.ShardID, first bool) {
	if !bugs.On(bugs.LoseLastApply) {
		return
	}
	undo := 1
	if first {
		undo = 2
	}
	codes, err := shard.UndoLastWrites(dir, undo)
	n.log.Warn("jepsen bug: undid the last link writes", "shard", s, "codes", codes, "err", err)
}
