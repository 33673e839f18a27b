package cluster

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/link"
)

// SubmitClicks proposes a click batch through shard s's Raft group (on its
// leader, forwarded if need be). An error means the outcome is unknown; the
// caller resends the same batch, which the FSM applies at most once.
func (n *Node) SubmitClicks(ctx context.Context, s int, b *fsm.ClickBatch) error {
	_, err := n.applyGroup(ctx, shardGroupID(s), b.Encode(), 0)
	return err
}

// ClickStats returns the click counts of a live or deleted link, with the
// hourly counts in [from, to): from this node's replica of the shard if it
// hosts one, else from a replica that does. Counts lag the clicks by the
// flush interval and the replication delay. link.ErrNotFound if no link
// ever had the code.
func (n *Node) ClickStats(ctx context.Context, code string, from, to time.Time) (*fsm.ClickStats, error) {
	ctx, cancel := withDefaultTimeout(ctx, 5*time.Second)
	defer cancel()
	s := n.ring.Locate(code)
	if _, err := n.lookupShard(ctx, s, code, false, 0); err != nil {
		return nil, err
	}
	if sh := n.localShard(s); sh != nil {
		return sh.FSM().Clicks(code, from, to)
	}
	addrs, err := n.replicaAddrs(s)
	if err != nil {
		return nil, err
	}
	last := fmt.Errorf("%w: no replica of shard %d known", link.ErrUnavailable, s)
	for _, a := range addrs {
		resp, err := n.rpc.call(ctx, a, &rpcRequest{Op: opClicks, Group: uint64(s), Code: code, From: from.Unix(), To: to.Unix()})
		if err == nil {
			err = errFromWire(resp.Err, resp.Detail)
		}
		if err == nil {
			return fsm.DecodeClickStats(resp.Clicks)
		}
		if !errors.Is(err, link.ErrUnavailable) {
			return nil, err
		}
		last = err
	}
	return nil, last
}

// VisitorSalt is the salt of visitor hashes on a UTC day: an HMAC of the
// day under a key derived from the cluster's secret code key, so every node
// agrees on it (a visitor counts once whichever node they reach) and it
// changes daily (hashes of different days cannot be linked).
func (n *Node) VisitorSalt(day time.Time) []byte {
	mac := hmac.New(sha256.New, n.settings.CodeKey)
	mac.Write([]byte("linkraft visitor salt\x00"))
	mac.Write([]byte(day.UTC().Format("2006-01-02")))
	return mac.Sum(nil)
}

// ConsumeVisit grants one visit of a link with a visit limit, through the
// shard's Raft group, so exactly MaxVisits grants ever succeed cluster-wide;
// link.ErrGone once they are used up. A grant whose outcome is unknown is
// retried with the same nonce (never counted twice) until ctx ends. Links
// without a limit cost nothing here: callers skip them.
func (n *Node) ConsumeVisit(ctx context.Context, code string) (*link.Link, error) {
	ctx, cancel := withDefaultTimeout(ctx, 5*time.Second)
	defer cancel()
	cmd := (&fsm.ConsumeVisit{Code: code, Nonce: newNonce()}).Encode()
	group := shardGroupID(n.ring.Locate(code))
	for {
		r, err := n.applyGroup(ctx, group, cmd, 0)
		if err == nil {
			n.announceChange(r.link)
			return r.link, nil
		}
		if !errors.Is(err, link.ErrUnavailable) || ctx.Err() != nil {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(retryPause):
		}
	}
}
