package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/link"
)

// Links is the node's links role: create, read, update and delete links,
// list them and count their tags (list.go), in bulk (bulk.go) and once per
// Idempotency-Key (idempotency.go).
type Links struct{ n *Node }

// maxGeneratedAttempts bounds how many IDs one create may consume when
// generated codes clash with aliases or reserved words.
const maxGeneratedAttempts = 64

// Create stores a new link; req has passed link.CreateRequest.Validate.
// With an alias it fails with link.ErrAliasTaken
// if the alias is in use (tombstones included); without one it takes IDs
// from the allocator until a code is free.
func (ls *Links) Create(ctx context.Context, req link.CreateRequest) (*link.Link, error) {
	n := ls.n
	cmd := newCreate(req, time.Now().UTC())
	if err := n.supports(cmd.Level()); err != nil {
		return nil, err
	}
	if cmd.Code != "" {
		return ls.applyCreate(ctx, &cmd)
	}
	for range maxGeneratedAttempts {
		code, err := ls.nextCode(ctx)
		if err != nil {
			return nil, err
		}
		cmd.Code = code
		l, err := ls.applyCreate(ctx, &cmd)
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
// reserved words, and preferring a code whose shard this node leads
// (locality.go).
func (ls *Links) nextCode(ctx context.Context) (string, error) {
	n := ls.n
	eligible, focus := n.locality.preferred(n)
	if n.leadsAny(focus) {
		eligible = focus
	} else if !n.leadsAny(eligible) {
		eligible = nil
	}
	fallback, draws := "", 0
	for range maxGeneratedAttempts {
		id, err := n.alloc.Next(ctx)
		if err != nil {
			return "", fmt.Errorf("%w: allocate id: %w", link.ErrUnavailable, err)
		}
		code, err := n.host.coder.Code(id)
		if err != nil {
			return "", fmt.Errorf("%w: %w", link.ErrExhausted, err)
		}
		if link.IsReserved(code) {
			continue
		}
		if eligible == nil || n.preferLocal(eligible, code) {
			return code, nil
		}
		if fallback == "" {
			fallback = code
		}
		if draws++; draws >= maxLocalDraws {
			return fallback, nil
		}
	}
	if fallback != "" {
		return fallback, nil
	}
	return "", fmt.Errorf("%w: no free code after %d ids", link.ErrUnavailable, maxGeneratedAttempts)
}

// applyCreate proposes a create on the code's shard leader. The nonce makes
// it idempotent, so a create whose outcome is unknown (the leader failed,
// the forwarded call timed out) is retried with the same code and nonce until
// ctx ends: the retry returns the link the first attempt made, or makes it.
func (ls *Links) applyCreate(ctx context.Context, cmd *command.CreateIfAbsent) (*link.Link, error) {
	n := ls.n
	ctx, cancel := withDefaultTimeout(ctx, 10*time.Second)
	defer cancel()
	data := cmd.Encode()
	group := n.host.locate(cmd.Code).Group()
	if l, err, ok := n.faultEarlyAck(ctx, group, data, cmd); ok {
		return l, err
	}
	r, err := n.router.retryUnknown(ctx, group, data)
	if err != nil {
		return nil, err
	}
	return r.Link, nil
}

// Get returns the link for code, a tombstone (Deleted set: its code, owner
// and dates) for a deleted one. With consistent it is a linearizable read on
// the shard leader; otherwise it reads this node's replica, asking the
// leader about codes it lacks.
func (ls *Links) Get(ctx context.Context, code string, consistent bool) (*link.Link, error) {
	ctx, cancel := withDefaultTimeout(ctx, 10*time.Second)
	defer cancel()
	return ls.n.router.lookup(ctx, ls.n.host.locate(code), code, consistent, 0)
}

// Resolve is the redirect path: the link for code as this node sees it,
// tombstones included (the caller answers 410 for them). See lookupShard.
func (ls *Links) Resolve(ctx context.Context, code string) (*link.Link, error) {
	if l, ok := ls.ResolveLocal(code); ok {
		return l, nil
	}
	ctx, cancel := withDefaultTimeout(ctx, 5*time.Second)
	defer cancel()
	return ls.n.router.lookup(ctx, ls.n.host.locate(code), code, false, 0)
}

// ResolveLocal is Resolve's hot path: the link (tombstones included) if
// this node holds code's shard and knows the code, without waiting on
// anything; false otherwise (an unknown code, a shard held elsewhere),
// where Resolve goes on to the full lookup. No deadline is set up for it:
// a context.WithTimeout per redirect was a timer and a cancel registration
// on the request's context.
func (ls *Links) ResolveLocal(code string) (*link.Link, bool) {
	sh := ls.n.host.local(ls.n.host.locate(code))
	if sh == nil {
		return nil, false
	}
	g := sh.Group()
	l, err := sh.Lookup(code, g.IsLeader() && g.LeaderReady())
	return l, err == nil
}

// Update applies a patch (one that passed link.Patch.Validate) to a live
// link.
func (ls *Links) Update(ctx context.Context, code string, p link.Patch) (*link.Link, error) {
	n := ls.n
	u := command.Update{Code: code, Now: time.Now().UTC(), Patch: p}
	if err := n.supports(u.Level()); err != nil {
		return nil, err
	}
	ctx, cancel := withDefaultTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := n.router.apply(ctx, n.host.locate(code).Group(), u.Encode(), 0)
	if err != nil {
		return nil, err
	}
	n.remote.announce(n.gossip, r.Link)
	return r.Link, nil
}

// Delete turns a live link into a tombstone.
func (ls *Links) Delete(ctx context.Context, code string) error {
	n := ls.n
	ctx, cancel := withDefaultTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := n.router.apply(ctx, n.host.locate(code).Group(), (&command.Delete{Code: code, Now: time.Now().UTC()}).Encode(), 0)
	if err != nil {
		return err
	}
	n.remote.announce(n.gossip, r.Link)
	return nil
}

// ConsumeVisit grants one visit of a link with a visit limit, through the
// shard's Raft group, so exactly MaxVisits grants ever succeed cluster-wide;
// link.ErrGone once they are used up. A grant whose outcome is unknown is
// retried with the same nonce (never counted twice) until ctx ends. Links
// without a limit cost nothing here: callers skip them.
func (ls *Links) ConsumeVisit(ctx context.Context, code string) (*link.Link, error) {
	n := ls.n
	ctx, cancel := withDefaultTimeout(ctx, 5*time.Second)
	defer cancel()
	cmd := (&command.ConsumeVisit{Code: code, Nonce: newNonce()}).Encode()
	r, err := n.router.retryUnknown(ctx, n.host.locate(code).Group(), cmd)
	if err != nil {
		return nil, err
	}
	n.remote.announce(n.gossip, r.Link)
	return r.Link, nil
}
