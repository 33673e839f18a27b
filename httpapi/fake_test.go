package httpapi_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/httpapi"
	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/internal/status"
	"github.com/linkraft/linkraft/link"
)

// fakeService is the node as the HTTP layer sees it, in memory: links with
// tombstones, generated codes, keys and the blocklist. Handler tests that
// put no cluster behaviour under test run against it instead of booting
// Raft; what they check (status codes, problem documents, scopes, owners,
// limits, headers) is the HTTP layer's alone.
type fakeService struct {
	mu      sync.Mutex
	links   map[string]*link.Link
	next    int
	version uint64
	keys    map[apikey.Hash]apikey.Key
	blocked map[string]time.Time
	claims  map[string]fakeClaim // Idempotency-Key claims, by identity
	// listDelay is how long each List takes (a slow cluster).
	listDelay time.Duration
}

// fakeClaim is what a claimed Idempotency-Key made.
type fakeClaim struct {
	body  string
	codes []string
}

var _ httpapi.Service = (*fakeService)(nil)

// newFakeService holds one admin key, of secret.
func newFakeService(secret string) *fakeService {
	f := &fakeService{links: map[string]*link.Link{}, keys: map[apikey.Hash]apikey.Key{}, blocked: map[string]time.Time{}}
	k := apikey.Key{ID: "0000000000000001", Name: "first", Owner: "admin", Scopes: apikey.Admin, CreatedAt: time.Now().UTC(), Hash: apikey.HashOf(secret)}
	f.keys[k.Hash] = k
	return f
}

func (f *fakeService) Create(_ context.Context, req link.CreateRequest) (*link.Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.createLocked(req)
}

func (f *fakeService) createLocked(req link.CreateRequest) (*link.Link, error) {
	code := req.Alias
	if code == "" {
		for code == "" || f.links[code] != nil || link.IsReserved(code) {
			f.next++
			code = fmt.Sprintf("g%05d", f.next)
		}
	} else if f.links[code] != nil {
		return nil, link.ErrAliasTaken
	}
	if req.Redirect == 0 {
		req.Redirect = link.DefaultRedirect
	}
	now := time.Now().UTC()
	f.version++
	l := &link.Link{Code: code, URL: req.URL, Owner: req.Owner, CreatedAt: now, UpdatedAt: now, ExpiresAt: req.ExpiresAt,
		Redirect: req.Redirect, MaxVisits: req.MaxVisits, Tags: req.Tags, DropQuery: req.DropQuery, Title: req.Title,
		Description: req.Description, PasswordHash: req.PasswordHash, Rules: req.Rules, Version: f.version}
	f.links[code] = l
	return l.Clone(), nil
}

func (f *fakeService) CreateOnce(ctx context.Context, req link.CreateRequest, idem cluster.Idempotency) (*link.Link, bool, error) {
	res, replayed, err := f.CreateManyOnce(ctx, []link.CreateRequest{req}, idem)
	if err != nil {
		return nil, false, err
	}
	return res[0].Link, replayed, res[0].Err
}

// CreateManyOnce answers a known key with the links it made (not stored
// again), as the cluster does.
func (f *fakeService) CreateManyOnce(_ context.Context, reqs []link.CreateRequest, idem cluster.Idempotency) ([]cluster.CreateResult, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.claims == nil {
		f.claims = map[string]fakeClaim{}
	}
	out := make([]cluster.CreateResult, len(reqs))
	if c, ok := f.claims[idem.Key]; ok {
		if c.body != idem.Body || len(c.codes) != len(reqs) {
			return nil, false, cluster.ErrIdempotencyMismatch
		}
		for i, code := range c.codes {
			if l := f.links[code]; l != nil {
				out[i].Link = l.Clone()
			} else {
				out[i].Err = link.ErrAliasTaken
			}
		}
		return out, true, nil
	}
	c := fakeClaim{body: idem.Body, codes: make([]string, len(reqs))}
	for i, r := range reqs {
		out[i].Link, out[i].Err = f.createLocked(r)
		if out[i].Link != nil {
			c.codes[i] = out[i].Link.Code
		}
	}
	f.claims[idem.Key] = c
	return out, false, nil
}

func (f *fakeService) CreateMany(_ context.Context, reqs []link.CreateRequest) []cluster.CreateResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]cluster.CreateResult, len(reqs))
	for i, r := range reqs {
		out[i].Link, out[i].Err = f.createLocked(r)
	}
	return out
}

// lookup returns a copy of code's link, tombstones included.
func (f *fakeService) lookup(code string) (*link.Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.links[code]
	if l == nil {
		return nil, link.ErrNotFound
	}
	return l.Clone(), nil
}

func (f *fakeService) Get(_ context.Context, code string, _ bool) (*link.Link, error) {
	return f.lookup(code)
}

func (f *fakeService) Resolve(_ context.Context, code string) (*link.Link, error) {
	return f.lookup(code)
}

func (f *fakeService) ResolveLocal(code string) (*link.Link, bool) {
	l, err := f.lookup(code)
	return l, err == nil
}

func (f *fakeService) Update(_ context.Context, code string, p link.Patch) (*link.Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.links[code]
	if err := live(l); err != nil {
		return nil, err
	}
	if p.URL != nil {
		l.URL = *p.URL
	}
	if p.ExpiresAt != nil {
		l.ExpiresAt = *p.ExpiresAt
	}
	if p.Redirect != nil {
		l.Redirect = *p.Redirect
	}
	if p.Disabled != nil {
		l.Disabled = *p.Disabled
	}
	if p.Tags != nil {
		l.Tags = *p.Tags
		if len(l.Tags) == 0 {
			l.Tags = nil
		}
	}
	if p.DropQuery != nil {
		l.DropQuery = *p.DropQuery
	}
	if p.Title != nil {
		l.Title = *p.Title
	}
	if p.Description != nil {
		l.Description = *p.Description
	}
	if p.PasswordHash != nil {
		l.PasswordHash = *p.PasswordHash
	}
	if p.Rules != nil {
		l.Rules = *p.Rules
	}
	f.version++
	l.UpdatedAt, l.Version = time.Now().UTC(), f.version
	return l.Clone(), nil
}

func (f *fakeService) Delete(_ context.Context, code string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.links[code]
	if err := live(l); err != nil {
		return err
	}
	f.version++
	f.links[code] = &link.Link{Code: code, Owner: l.Owner, CreatedAt: l.CreatedAt, UpdatedAt: time.Now().UTC(), Deleted: true, Version: f.version}
	return nil
}

func (f *fakeService) ConsumeVisit(_ context.Context, code string) (*link.Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.links[code]
	if err := live(l); err != nil {
		return nil, err
	}
	if l.OutOfVisits() {
		return nil, link.ErrGone
	}
	l.Visits++
	return l.Clone(), nil
}

// ForEachLink visits the links in code order.
func (f *fakeService) ForEachLink(fn func(l *link.Link) bool) error {
	f.mu.Lock()
	codes := make([]string, 0, len(f.links))
	for c := range f.links {
		codes = append(codes, c)
	}
	f.mu.Unlock()
	sort.Strings(codes)
	for _, c := range codes {
		l, err := f.lookup(c)
		if err == nil && !fn(l) {
			break
		}
	}
	return nil
}

func (f *fakeService) Status() cluster.Status {
	return cluster.Status{NodeID: "fake", Nodes: []cluster.NodeInfo{}, Shards: []cluster.GroupInfo{}}
}
func (f *fakeService) Ready(context.Context) error              { return nil }
func (f *fakeService) RemoveNode(context.Context, string) error { return cluster.ErrUnknownNode }
func (f *fakeService) Leases() ([]cluster.Lease, error)         { return nil, nil }
func (f *fakeService) Digests() ([]status.Digest, error)        { return nil, nil }

func (f *fakeService) Stats(_ context.Context, code string, q link.StatsQuery) (*link.Link, *link.Stats, error) {
	l, err := f.lookup(code)
	if err != nil {
		return nil, nil, err
	}
	st := &link.Stats{Since: l.CreatedAt}
	for t := q.From; t.Before(q.To); t = t.Add(q.Step) {
		st.Series = append(st.Series, link.StatsPoint{Time: t})
	}
	return l, st, nil
}

func (f *fakeService) ClickCount(context.Context, string) (uint64, error) { return 0, nil }

func (f *fakeService) Visits(context.Context, string, time.Time, time.Time, int) ([]link.Visit, cluster.Gathered, error) {
	return []link.Visit{}, cluster.Gathered{}, nil
}

func (f *fakeService) Orphans(context.Context, int) (link.OrphanSummary, cluster.Gathered) {
	return link.OrphanSummary{Top: []link.CodeCount{}}, cluster.Gathered{}
}

func (f *fakeService) Authenticate(secret string) (apikey.Key, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if k, ok := f.keys[apikey.HashOf(secret)]; ok {
		return k, nil
	}
	return apikey.Key{}, cluster.ErrUnauthorized
}

func (f *fakeService) Keys() ([]apikey.Key, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]apikey.Key, 0, len(f.keys))
	for _, k := range f.keys {
		out = append(out, k)
	}
	apikey.Sort(out)
	return out, nil
}

func (f *fakeService) CreateKey(_ context.Context, req cluster.KeyRequest) (string, apikey.Key, error) {
	secret, err := apikey.NewSecret()
	if err != nil {
		return "", apikey.Key{}, err
	}
	id, err := apikey.NewID()
	if err != nil {
		return "", apikey.Key{}, err
	}
	k := apikey.Key{ID: id, Name: req.Name, Owner: req.Owner, Scopes: req.Scopes, RateLimit: req.RateLimit,
		CreatedAt: time.Now().UTC(), Hash: apikey.HashOf(secret)}
	f.mu.Lock()
	f.keys[k.Hash] = k
	f.mu.Unlock()
	return secret, k, nil
}

func (f *fakeService) RevokeKey(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for h, k := range f.keys {
		if k.ID == id {
			delete(f.keys, h)
			return nil
		}
	}
	return cluster.ErrKeyNotFound
}

func (f *fakeService) SetBlocked(_ context.Context, domain string, blocked bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if blocked {
		f.blocked[domain] = time.Now().UTC()
	} else {
		delete(f.blocked, domain)
	}
	return nil
}

func (f *fakeService) Blocklist() (map[string]time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]time.Time, len(f.blocked))
	for d, t := range f.blocked {
		out[d] = t
	}
	return out, nil
}

func (f *fakeService) Blocked(host string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return link.InDomains(f.blocked, host)
}

func (f *fakeService) BlockedURL(u string) bool {
	host := u
	if i := strings.Index(host, "://"); i >= 0 {
		host = host[i+3:]
	}
	if i := strings.IndexAny(host, "/?#"); i >= 0 {
		host = host[:i]
	}
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[i:], "]") {
		host = host[:i]
	}
	return f.Blocked(strings.ToLower(host))
}

// live answers as the shard FSM does: link.ErrNotFound for no link,
// link.ErrDeleted for a tombstone.
func live(l *link.Link) error {
	switch {
	case l == nil:
		return link.ErrNotFound
	case l.Deleted:
		return link.ErrDeleted
	}
	return nil
}

// List pages through the fake's live links as the cluster does.
func (f *fakeService) List(ctx context.Context, q link.ListQuery) (link.ListPage, error) {
	if f.listDelay > 0 {
		t := time.NewTimer(f.listDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			return link.ListPage{}, ctx.Err()
		case <-t.C:
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var all []*link.Link
	for _, l := range f.links {
		if l.Deleted || (q.Owner != "" && l.Owner != q.Owner) || !q.Matches(l) ||
			(!q.CreatedAfter.IsZero() && !l.CreatedAt.After(q.CreatedAfter)) ||
			(!q.CreatedBefore.IsZero() && !l.CreatedAt.Before(q.CreatedBefore)) {
			continue
		}
		all = append(all, l.Clone())
	}
	order := func(a, b link.ListPosition) int {
		c := a.Created.Compare(b.Created) // by clicks too: the fake counts none

		if c == 0 {
			c = strings.Compare(a.Code, b.Code)
		}
		if q.Desc {
			return -c
		}
		return c
	}
	pos := func(l *link.Link) link.ListPosition { return link.ListPosition{Created: l.CreatedAt, Code: l.Code} }
	slices.SortFunc(all, func(a, b *link.Link) int { return order(pos(a), pos(b)) })
	if q.After != nil {
		all = slices.DeleteFunc(all, func(l *link.Link) bool { return order(pos(l), *q.After) <= 0 })
	}
	var page link.ListPage
	if len(all) > q.Limit {
		all = all[:q.Limit]
		p := pos(all[len(all)-1])
		page.Next = &p
	}
	page.Links = all
	page.Clicks = make([]uint64, len(all)) // the fake counts no clicks
	return page, nil
}

// Tags counts the fake's live links' tags.
func (f *fakeService) Tags(_ context.Context, owner string, limit int) ([]link.TagCount, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	counts := map[string]uint64{}
	for _, l := range f.links {
		if !l.Deleted && (owner == "" || l.Owner == owner) {
			for _, t := range l.Tags {
				counts[t]++
			}
		}
	}
	out := []link.TagCount{}
	for t, c := range counts {
		out = append(out, link.TagCount{Tag: t, Links: c})
	}
	slices.SortFunc(out, func(a, b link.TagCount) int {
		if a.Links != b.Links {
			return int(b.Links) - int(a.Links)
		}
		return strings.Compare(a.Tag, b.Tag)
	})
	return out[:min(len(out), limit)], false, nil
}
