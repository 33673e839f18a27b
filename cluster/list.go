package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/link"
)

// listBudget bounds the encoded links of one shard's answer to a listing
// over the RPC (well inside maxFrame); a shard with more says so and the
// page stops where its answer did.
const listBudget = 768 << 10

// shardPage is one shard's part of a listing: its links in order, and
// whether it may have more past the last.
type shardPage struct {
	links []*link.Link
	more  bool
}

// List returns one page of the live links that pass q, across every shard,
// in creation order (then code; newest first with q.Desc) past q.After.
// Each shard's part is read linearizably on its leader, so a page holds
// every link acknowledged before the call that passes q; the shards' parts
// are merged, and the page ends where the shard with the earliest last
// link may go on, so no link is skipped or repeated from page to page.
func (n *Node) List(ctx context.Context, q link.ListQuery) (link.ListPage, error) {
	if !n.clusterAt(levelListing) {
		return link.ListPage{}, ErrUpgradeNeeded
	}
	ctx, cancel := withDefaultTimeout(ctx, 10*time.Second)
	defer cancel()
	q.Limit = min(max(q.Limit, 1), link.MaxListLimit)
	parts := make([]shardPage, n.ring.Shards())
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for s := range parts {
		wg.Go(func() { parts[s], errs[s] = n.listShard(ctx, s, q, 0) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return link.ListPage{}, err
	}
	return mergePages(parts, q), nil
}

// mergePages merges the shards' parts of a listing into one page of at
// most q.Limit links. A part that may have more past its last link (a
// shard's answer cut short by its size) ends the page there: a link of
// that shard past it could come before the other parts' next links.
func mergePages(parts []shardPage, q link.ListQuery) link.ListPage {
	var all []*link.Link
	var cut *link.ListPosition // the earliest last link of a part that may have more
	for _, p := range parts {
		all = append(all, p.links...)
		if p.more && len(p.links) > 0 {
			last := positionOf(p.links[len(p.links)-1])
			if cut == nil || after(*cut, last, q.Desc) {
				cut = &last
			}
		}
	}
	slices.SortFunc(all, func(a, b *link.Link) int {
		c := a.CreatedAt.Compare(b.CreatedAt)
		if c == 0 {
			c = cmp.Compare(a.Code, b.Code)
		}
		if q.Desc {
			return -c
		}
		return c
	})
	more := cut != nil
	if cut != nil {
		all = slices.DeleteFunc(all, func(l *link.Link) bool { return after(positionOf(l), *cut, q.Desc) })
	}
	if len(all) > q.Limit {
		all, more = all[:q.Limit], true
	}
	page := link.ListPage{Links: all}
	if more && len(all) > 0 {
		p := positionOf(all[len(all)-1])
		page.Next = &p
	}
	return page
}

func positionOf(l *link.Link) link.ListPosition {
	return link.ListPosition{Created: l.CreatedAt, Code: l.Code}
}

// after reports whether a comes after b in a listing's order.
func after(a, b link.ListPosition, desc bool) bool {
	c := a.Created.Compare(b.Created)
	if c == 0 {
		c = cmp.Compare(a.Code, b.Code)
	}
	if desc {
		return c < 0
	}
	return c > 0
}

// listShard reads shard s's part of a listing on its leader, asking again
// while leadership moves.
func (n *Node) listShard(ctx context.Context, s int, q link.ListQuery, hops int) (shardPage, error) {
	for {
		p, err := n.listOnce(ctx, s, q, hops)
		if !errors.Is(err, link.ErrNotLeader) || hops > 0 {
			return p, err
		}
		if err := pause(ctx); err != nil {
			return shardPage{}, fmt.Errorf("%w: listing shard %d: %w", link.ErrUnavailable, s, err)
		}
	}
}

func (n *Node) listOnce(ctx context.Context, s int, q link.ListQuery, hops int) (shardPage, error) {
	if sh := n.localShard(s); sh != nil {
		g := sh.Group()
		if g.IsLeader() {
			if err := g.VerifyRead(ctx); err != nil {
				return shardPage{}, err
			}
			links, err := sh.FSM().ListLinks(q)
			return shardPage{links: links, more: len(links) == q.Limit}, err
		}
		addr, id := g.Leader()
		if hops >= maxHops || addr == "" || id == n.cfg.NodeID {
			return shardPage{}, link.ErrNotLeader
		}
		return n.remoteList(ctx, addr, s, q, hops)
	}
	none := fmt.Errorf("%w: no replica of shard %d reachable", link.ErrUnavailable, s)
	if hops >= maxHops {
		return shardPage{}, none
	}
	return askReplicas(n, s, none, unavailable, func(addr string) (shardPage, error) {
		return n.remoteList(ctx, addr, s, q, hops)
	})
}

func (n *Node) remoteList(ctx context.Context, addr string, s int, q link.ListQuery, hops int) (shardPage, error) {
	resp, err := n.rpc.call(ctx, addr, &rpcRequest{Op: opList, Group: uint64(s), List: &q, Hops: hops + 1})
	if err != nil {
		return shardPage{}, err
	}
	if err := errFromWire(resp.Err, resp.Detail); err != nil {
		return shardPage{}, err
	}
	p := shardPage{more: resp.More, links: make([]*link.Link, 0, len(resp.Batch))}
	for _, item := range resp.Batch {
		l, err := command.DecodeLink(item.Link)
		if err != nil {
			return shardPage{}, err
		}
		p.links = append(p.links, l)
	}
	return p, nil
}

// serveList answers opList: this shard's part, at most listBudget bytes
// of it.
func (n *Node) serveList(ctx context.Context, req *rpcRequest, resp *rpcResponse) error {
	if req.List == nil || req.Group >= uint64(n.ring.Shards()) {
		return fmt.Errorf("%w: a listing needs a query and a shard", link.ErrInvalidInput)
	}
	q := *req.List
	q.Limit = min(max(q.Limit, 1), link.MaxListLimit)
	p, err := n.listShard(ctx, int(req.Group), q, req.Hops)
	if err != nil {
		return err
	}
	size := 0
	for i, l := range p.links {
		b := command.EncodeLink(l)
		if size += len(b); size > listBudget && i > 0 {
			resp.More = true
			break
		}
		resp.Batch = append(resp.Batch, rpcItem{Link: b})
	}
	resp.More = resp.More || p.more
	return nil
}
