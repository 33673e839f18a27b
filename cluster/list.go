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
	"github.com/linkraft/linkraft/peer"
	"github.com/linkraft/linkraft/shard"
)

// listBudget bounds the encoded links of one shard's answer to a listing
// over the RPC (well inside maxFrame); a shard with more says so and the
// page stops where its answer did.
const listBudget = 768 << 10

// DefaultListScan is how many index entries a listing examines on each
// shard for one page (Config.ListScan). A filter the indexes do not
// answer (q, expired, disabled, a tag across owners) may pass few of them:
// the page then ends where the scan did, maybe short or empty, with a
// cursor to go on, rather than read a whole shard for one request.
const DefaultListScan = 10000

// shardPage is one shard's part of a listing: its links in order, and
// whether it may have more past the last.
type shardPage struct {
	links []*link.Link
	// clicks are the links' human clicks; nil from an older node.
	clicks []uint64
	more   bool
	// stop, if set, is where the shard's scan ran out (at or past its
	// last link): it has not looked past it.
	stop *link.ListPosition
}

// List returns one page of the live links that pass q, across every shard,
// in creation order (then code; newest first with q.Desc) past q.After.
// Each shard's part is read linearizably on its leader, so a page holds
// every link acknowledged before the call that passes q; the shards' parts
// are merged, and the page ends where the shard with the earliest last
// link may go on, so no link is skipped or repeated from page to page.
func (ls *Links) List(ctx context.Context, q link.ListQuery) (link.ListPage, error) {
	n := ls.n
	if !n.clusterAt(levelListing) || q.ByClicks && !n.clusterAt(levelListClicks) {
		return link.ListPage{}, link.ErrUpgradeNeeded
	}
	ctx, cancel := withDefaultTimeout(ctx, 10*time.Second)
	defer cancel()
	q.Limit = min(max(q.Limit, 1), link.MaxListLimit)
	parts := make([]shardPage, n.host.ring.Shards())
	errs := make([]error, len(parts))
	// Each shard is asked for its share of the page with room to spare,
	// not for the whole page: a shard whose part is cut short ends the
	// page there (mergePages), so a page is never wrong, only at times
	// shorter than the limit, with a cursor to go on.
	sq := q
	sq.Limit = shardLimit(q.Limit, len(parts))
	sq.Scan = n.cfg.ListScan
	var wg sync.WaitGroup
	for s := range parts {
		wg.Go(func() { parts[s], errs[s] = ls.listShard(ctx, command.ShardID(s), sq, 0) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return link.ListPage{}, err
	}
	return mergePages(parts, q), nil
}

// shardLimit is how many links a listing asks each of shards shards for,
// for a page of limit: twice its even share and 8 more (so that uneven
// shards still fill most pages), never more than the page.
func shardLimit(limit, shards int) int {
	return min(limit, 2*((limit+shards-1)/shards)+8)
}

// mergePages merges the shards' parts of a listing into one page of at
// most q.Limit links. A part that may have more past its last link (a
// shard's answer cut short by its size) ends the page there: a link of
// that shard past it could come before the other parts' next links. So
// does a part whose scan ran out, where it stopped: the page then goes on
// from there, though no link may sit at that place.
func mergePages(parts []shardPage, q link.ListQuery) link.ListPage {
	type entry struct {
		l   *link.Link
		pos link.ListPosition
	}
	var all []entry
	counted := true
	var cut *link.ListPosition // the earliest last link of a part that may have more
	for _, p := range parts {
		counted = counted && len(p.clicks) == len(p.links)
		for i, l := range p.links {
			e := entry{l: l, pos: link.ListPosition{Created: l.CreatedAt, Code: l.Code}}
			if i < len(p.clicks) {
				e.pos.Clicks = p.clicks[i]
			}
			all = append(all, e)
		}
		if p.more && len(p.links) > 0 {
			last := all[len(all)-1].pos
			if cut == nil || compare(last, *cut, q) < 0 {
				cut = &last
			}
		}
		if p.stop != nil && (cut == nil || compare(*p.stop, *cut, q) < 0) {
			stop := *p.stop
			cut = &stop
		}
	}
	slices.SortFunc(all, func(a, b entry) int { return compare(a.pos, b.pos, q) })
	more := cut != nil
	if cut != nil {
		all = slices.DeleteFunc(all, func(e entry) bool { return after(e.pos, *cut, q) })
	}
	next := cut // every part has been read up to it
	if len(all) > q.Limit {
		all, more = all[:q.Limit], true
		next = nil
	}
	page := link.ListPage{Links: make([]*link.Link, len(all))}
	if counted {
		page.Clicks = make([]uint64, len(all))
	}
	for i, e := range all {
		page.Links[i] = e.l
		if counted {
			page.Clicks[i] = e.pos.Clicks
		}
	}
	switch {
	case next != nil:
		page.Next = next
	case more && len(all) > 0:
		p := all[len(all)-1].pos
		page.Next = &p
	}
	return page
}

// compare orders two positions as q lists them.
func compare(a, b link.ListPosition, q link.ListQuery) int {
	c := 0
	if q.ByClicks {
		c = cmp.Compare(a.Clicks, b.Clicks)
	}
	if c == 0 {
		c = a.Created.Compare(b.Created)
	}
	if c == 0 {
		c = cmp.Compare(a.Code, b.Code)
	}
	if q.Desc {
		return -c
	}
	return c
}

// after reports whether a comes after b in q's order.
func after(a, b link.ListPosition, q link.ListQuery) bool { return compare(a, b, q) > 0 }

// listShard reads shard s's part of a listing on its leader.
func (ls *Links) listShard(ctx context.Context, s command.ShardID, q link.ListQuery, hops int) (shardPage, error) {
	return onLeader(ctx, ls.n, s, hops, func(sh *shard.Shard) (shardPage, error) {
		res, err := sh.List(q)
		return shardPage{links: res.Links, clicks: res.Clicks, more: len(res.Links) == q.Limit, stop: res.Stop}, err
	}, func(addr string) (shardPage, error) { return ls.remoteList(ctx, addr, s, q, hops) })
}

func (ls *Links) remoteList(ctx context.Context, addr string, s command.ShardID, q link.ListQuery, hops int) (shardPage, error) {
	resp, err := ls.n.peers.List(ctx, addr, s, q, hops+1)
	if err != nil {
		return shardPage{}, err
	}
	p := shardPage{more: resp.More, stop: resp.Stop, links: make([]*link.Link, 0, len(resp.Links)), clicks: make([]uint64, 0, len(resp.Links))}
	for _, l := range resp.Links {
		if l.Link == nil {
			return shardPage{}, fmt.Errorf("%w: a listing answer without its link", link.ErrUnavailable)
		}
		p.links, p.clicks = append(p.links, l.Link), append(p.clicks, l.Clicks)
	}
	return p, nil
}

// serveList answers a shard's part of a listing: at most listBudget bytes
// of it.
func (ls *Links) serveList(ctx context.Context, req *peer.ListRequest) (*peer.ListResponse, error) {
	q := req.Query
	q.Limit = min(max(q.Limit, 1), link.MaxListLimit)
	p, err := ls.listShard(ctx, req.Shard, q, req.Hops)
	if err != nil {
		return nil, err
	}
	resp := &peer.ListResponse{}
	size := 0
	for i, l := range p.links {
		if size += encodedSize(l); size > listBudget && i > 0 {
			resp.More = true
			break
		}
		item := peer.ListedLink{Link: l}
		if i < len(p.clicks) {
			item.Clicks = p.clicks[i]
		}
		resp.Links = append(resp.Links, item)
	}
	if !resp.More {
		// Cut short by size, the answer ends at its last link instead.
		resp.Stop = p.stop
	}
	resp.More = resp.More || p.more
	return resp, nil
}

// encodedSize is about the bytes l takes in an answer.
func encodedSize(l *link.Link) int { return len(command.EncodeRecord(l)) + len(l.Code) + 24 }

// maxTagsPerShard bounds one shard's answer to Tags (well inside
// maxFrame); a shard with more answers its most used and says so.
const maxTagsPerShard = 10000

// Tags counts the tags of the live links (owner's, or every owner's)
// across every shard, each read on its leader: most used first, at most
// limit of them. partial says a shard had more distinct tags than it
// answers for (maxTagsPerShard), so rare tags may be missing or short.
func (ls *Links) Tags(ctx context.Context, owner string, limit int) (tags []link.TagCount, partial bool, err error) {
	if !ls.n.clusterAt(levelListing) {
		return nil, false, link.ErrUpgradeNeeded
	}
	ctx, cancel := withDefaultTimeout(ctx, 10*time.Second)
	defer cancel()
	parts := make([][]link.TagCount, ls.n.host.ring.Shards())
	short := make([]bool, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for s := range parts {
		wg.Go(func() {
			parts[s], errs[s] = ls.tagsShard(ctx, command.ShardID(s), owner, 0)
			short[s] = len(parts[s]) >= maxTagsPerShard
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, false, err
	}
	sum := map[string]uint64{}
	for _, p := range parts {
		for _, t := range p {
			sum[t.Tag] += t.Links
		}
	}
	return topTags(sum, limit), slices.Contains(short, true), nil
}

// topTags orders counts by count (then tag) and keeps the first limit.
func topTags(counts map[string]uint64, limit int) []link.TagCount {
	out := make([]link.TagCount, 0, len(counts))
	for t, c := range counts {
		out = append(out, link.TagCount{Tag: t, Links: c})
	}
	slices.SortFunc(out, func(a, b link.TagCount) int {
		if a.Links != b.Links {
			return cmp.Compare(b.Links, a.Links)
		}
		return cmp.Compare(a.Tag, b.Tag)
	})
	return out[:min(len(out), limit)]
}

func (ls *Links) tagsShard(ctx context.Context, s command.ShardID, owner string, hops int) ([]link.TagCount, error) {
	n := ls.n
	return onLeader(ctx, n, s, hops, func(sh *shard.Shard) ([]link.TagCount, error) {
		counts, err := sh.TagCounts(owner)
		if err != nil {
			return nil, err
		}
		return topTags(counts, maxTagsPerShard), nil
	}, func(addr string) ([]link.TagCount, error) {
		return n.peers.Tags(ctx, addr, s, owner, hops+1)
	})
}
