package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/link"
)

// maxGeneratedAttempts bounds how many IDs one create may consume when
// generated codes clash with aliases or reserved words.
const maxGeneratedAttempts = 64

// Create stores a new link; req has passed link.CreateRequest.Validate.
// With an alias it fails with link.ErrAliasTaken
// if the alias is in use (tombstones included); without one it takes IDs
// from the allocator until a code is free.
func (n *Node) Create(ctx context.Context, req link.CreateRequest) (*link.Link, error) {
	cmd := newCreate(req, time.Now().UTC())
	if err := n.supports(cmd.Level()); err != nil {
		return nil, err
	}
	if cmd.Code != "" {
		return n.applyCreate(ctx, &cmd)
	}
	for range maxGeneratedAttempts {
		code, err := n.nextCode(ctx)
		if err != nil {
			return nil, err
		}
		cmd.Code = code
		l, err := n.applyCreate(ctx, &cmd)
		if errors.Is(err, link.ErrAliasTaken) {
			// An alias got there first: that ID's code is someone's alias.
			continue
		}
		if faultLoseAnswer(err, &cmd) {
			continue
		}
		return l, err
	}
	return nil, fmt.Errorf("%w: no free code after %d ids", link.ErrUnavailable, maxGeneratedAttempts)
}

// newCreate builds the command of a validated request
// (link.CreateRequest.Validate); Code is the alias, or empty for a code the
// node generates. The leader's command.Check still refuses what the log must
// never hold.
func newCreate(req link.CreateRequest, now time.Time) command.CreateIfAbsent {
	code := req.Alias
	req.Alias = ""
	return command.CreateIfAbsent{Code: code, Now: now, Nonce: newNonce(), Request: req}
}

// nextCode returns the code of a fresh ID from the allocator, skipping
// reserved words.
func (n *Node) nextCode(ctx context.Context) (string, error) {
	for range maxGeneratedAttempts {
		id, err := n.alloc.Next(ctx)
		if err != nil {
			return "", fmt.Errorf("%w: allocate id: %w", link.ErrUnavailable, err)
		}
		code, err := n.coder.Code(id)
		if err != nil {
			return "", fmt.Errorf("%w: %w", link.ErrExhausted, err)
		}
		if !link.IsReserved(code) {
			return code, nil
		}
	}
	return "", fmt.Errorf("%w: no free code after %d ids", link.ErrUnavailable, maxGeneratedAttempts)
}

// applyCreate proposes a create on the code's shard leader. The nonce makes
// it idempotent, so a create whose outcome is unknown (the leader failed,
// the forwarded call timed out) is retried with the same code and nonce until
// ctx ends: the retry returns the link the first attempt made, or makes it.
func (n *Node) applyCreate(ctx context.Context, cmd *command.CreateIfAbsent) (*link.Link, error) {
	ctx, cancel := withDefaultTimeout(ctx, 10*time.Second)
	defer cancel()
	data := cmd.Encode()
	group := n.ring.Locate(cmd.Code).Group()
	if l, err, ok := n.faultEarlyAck(ctx, group, data, cmd); ok {
		return l, err
	}
	r, err := n.retryUnknown(ctx, group, data)
	if err != nil {
		return nil, err
	}
	return r.Link, nil
}

func withDefaultTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}

// Get returns the link for code, a tombstone (Deleted set: its code, owner
// and dates) for a deleted one. With consistent it is a linearizable read on
// the shard leader; otherwise it reads this node's replica, asking the
// leader about codes it lacks.
func (n *Node) Get(ctx context.Context, code string, consistent bool) (*link.Link, error) {
	ctx, cancel := withDefaultTimeout(ctx, 10*time.Second)
	defer cancel()
	return n.lookupShard(ctx, n.ring.Locate(code), code, consistent, 0)
}

// Resolve is the redirect path: the link for code as this node sees it,
// tombstones included (the caller answers 410 for them). See lookupShard.
func (n *Node) Resolve(ctx context.Context, code string) (*link.Link, error) {
	if l, ok := n.ResolveLocal(code); ok {
		return l, nil
	}
	ctx, cancel := withDefaultTimeout(ctx, 5*time.Second)
	defer cancel()
	return n.lookupShard(ctx, n.ring.Locate(code), code, false, 0)
}

// ResolveLocal is Resolve's hot path: the link (tombstones included) if
// this node holds code's shard and knows the code, without waiting on
// anything; false otherwise (an unknown code, a shard held elsewhere),
// where Resolve goes on to the full lookup. No deadline is set up for it:
// a context.WithTimeout per redirect was a timer and a cancel registration
// on the request's context.
func (n *Node) ResolveLocal(code string) (*link.Link, bool) {
	sh := n.localShard(n.ring.Locate(code))
	if sh == nil {
		return nil, false
	}
	g := sh.Group()
	l, err := sh.Lookup(code, g.IsLeader() && g.LeaderReady())
	return l, err == nil
}

// Update applies a patch (one that passed link.Patch.Validate) to a live
// link.
func (n *Node) Update(ctx context.Context, code string, p link.Patch) (*link.Link, error) {
	u := command.Update{Code: code, Now: time.Now().UTC(), Patch: p}
	if err := n.supports(u.Level()); err != nil {
		return nil, err
	}
	ctx, cancel := withDefaultTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := n.applyGroup(ctx, n.ring.Locate(code).Group(), u.Encode(), 0)
	if err != nil {
		return nil, err
	}
	n.announceChange(r.Link)
	return r.Link, nil
}

// Delete turns a live link into a tombstone.
func (n *Node) Delete(ctx context.Context, code string) error {
	ctx, cancel := withDefaultTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := n.applyGroup(ctx, n.ring.Locate(code).Group(), (&command.Delete{Code: code, Now: time.Now().UTC()}).Encode(), 0)
	if err != nil {
		return err
	}
	n.announceChange(r.Link)
	return nil
}

// ForEachLink calls fn for every link stored in the shards hosted here,
// tombstones included, read from the bbolt files (not the cache), shard by
// shard in code order, until fn returns false.
func (n *Node) ForEachLink(fn func(l *link.Link) bool) error {
	stop := false
	for _, s := range n.localShards() {
		if stop {
			break
		}
		err := s.FSM().Scan("", func(l *link.Link) bool {
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
func (n *Node) Leases() ([]Lease, error) {
	grants, err := n.metaFSM.Leases()
	if err != nil {
		return nil, err
	}
	out := make([]Lease, len(grants))
	for i, g := range grants {
		out[i] = Lease{Index: g.Index, Start: g.Start, End: g.End, Node: g.Node}
	}
	return out, nil
}

// Lease is one ID range the meta group granted: IDs [Start, End) to Node,
// by the entry at Index (0 for grants recorded before indexes were kept).
type Lease struct {
	Index uint64 `json:"index,omitempty"`
	Start uint64 `json:"start"`
	End   uint64 `json:"end"`
	Node  string `json:"node"`
}
