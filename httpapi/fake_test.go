package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/linkraft/linkraft/analytics"
	"github.com/linkraft/linkraft/httpapi"
	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/internal/backup"
	"github.com/linkraft/linkraft/internal/status"
	"github.com/linkraft/linkraft/link"
)

// The node's roles as the HTTP layer sees them, in memory: links with
// tombstones and generated codes (fakeLinks), keys and the blocklist
// (fakeKeys), and the admin and analytics roles over the same links.
// Handler tests that put no cluster behaviour under test run against them
// instead of booting Raft; what they check (status codes, problem
// documents, scopes, owners, limits, headers) is the HTTP layer's alone.

// fakeLinks is the links role.
type fakeLinks struct {
	mu      sync.Mutex
	links   map[string]*link.Link
	next    int
	version uint64
	claims  map[string]fakeClaim // Idempotency-Key claims, by identity
	// listDelay is how long each List takes (a slow cluster).
	listDelay time.Duration
}

// fakeKeys is the keys role: the keys and the blocklist.
type fakeKeys struct {
	mu      sync.Mutex
	keys    map[apikey.Hash]apikey.Key
	blocked map[string]time.Time
}

// fakeAdmin is the admin role of a node of one, over the fake's links.
type fakeAdmin struct{ links *fakeLinks }

// fakeAnalytics is the analytics role, counting no clicks.
type fakeAnalytics struct{ links *fakeLinks }

// roles are a node's four roles, as a test serves them.
type roles struct {
	links     httpapi.Links
	keys      httpapi.Keys
	admin     httpapi.Admin
	analytics httpapi.Analytics
}

// fakeClaim is what a claimed Idempotency-Key made.
type fakeClaim struct {
	body  string
	codes []string
}

var (
	_ httpapi.Links     = (*fakeLinks)(nil)
	_ httpapi.Keys      = (*fakeKeys)(nil)
	_ httpapi.Admin     = fakeAdmin{}
	_ httpapi.Analytics = fakeAnalytics{}
)

// newFakeRoles returns fake roles whose keys hold one admin key, of secret.
func newFakeRoles(secret string) roles {
	l := &fakeLinks{links: map[string]*link.Link{}}
	k := &fakeKeys{keys: map[apikey.Hash]apikey.Key{}, blocked: map[string]time.Time{}}
	first := apikey.Key{ID: "0000000000000001", Name: "first", Owner: "admin", Scopes: apikey.Admin, CreatedAt: time.Now().UTC(), Hash: apikey.HashOf(secret)}
	k.keys[first.Hash] = first
	return roles{links: l, keys: k, admin: fakeAdmin{l}, analytics: fakeAnalytics{l}}
}

func (f *fakeLinks) Create(_ context.Context, req link.CreateRequest) (*link.Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.createLocked(req)
}

func (f *fakeLinks) createLocked(req link.CreateRequest) (*link.Link, error) {
	code := req.Alias
	if code == "" {
		for code == "" || f.links[code] != nil || link.IsReserved(code) {
			f.next++
			code = fmt.Sprintf("g%05d", f.next)
		}
	} else if f.links[code] != nil {
		return nil, link.ErrAliasTaken
	}
	f.version++
	l := req.NewLink(code, time.Now().UTC(), 0, f.version)
	f.links[code] = l
	return l.Clone(), nil
}

func (f *fakeLinks) CreateOnce(ctx context.Context, req link.CreateRequest, idem link.Idempotency) (*link.Link, bool, error) {
	res, replayed, err := f.CreateManyOnce(ctx, []link.CreateRequest{req}, idem)
	if err != nil {
		return nil, false, err
	}
	return res[0].Link, replayed, res[0].Err
}

// CreateManyOnce answers a known key with the links it made (not stored
// again), as the cluster does.
func (f *fakeLinks) CreateManyOnce(_ context.Context, reqs []link.CreateRequest, idem link.Idempotency) ([]link.CreateResult, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.claims == nil {
		f.claims = map[string]fakeClaim{}
	}
	out := make([]link.CreateResult, len(reqs))
	if c, ok := f.claims[idem.Key]; ok {
		if c.body != idem.Body || len(c.codes) != len(reqs) {
			return nil, false, link.ErrIdempotencyMismatch
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

func (f *fakeLinks) CreateMany(_ context.Context, reqs []link.CreateRequest) []link.CreateResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]link.CreateResult, len(reqs))
	for i, r := range reqs {
		out[i].Link, out[i].Err = f.createLocked(r)
	}
	return out
}

// lookup returns a copy of code's link, tombstones included.
func (f *fakeLinks) lookup(code string) (*link.Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.links[code]
	if l == nil {
		return nil, link.ErrNotFound
	}
	return l.Clone(), nil
}

func (f *fakeLinks) Get(_ context.Context, code string, _ bool) (*link.Link, error) {
	return f.lookup(code)
}

func (f *fakeLinks) Resolve(_ context.Context, code string) (*link.Link, error) {
	return f.lookup(code)
}

func (f *fakeLinks) ResolveLocal(code string) (*link.Link, bool) {
	l, err := f.lookup(code)
	return l, err == nil
}

func (f *fakeLinks) Update(_ context.Context, code string, p link.Patch) (*link.Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.links[code]
	if err := live(l); err != nil {
		return nil, err
	}
	p.ApplyTo(l)
	if len(l.Tags) == 0 {
		l.Tags = nil // as the stored record gives them back
	}
	f.version++
	l.UpdatedAt, l.Version = time.Now().UTC(), f.version
	return l.Clone(), nil
}

func (f *fakeLinks) Delete(_ context.Context, code string) error {
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

func (f *fakeLinks) ConsumeVisit(_ context.Context, code string) (*link.Link, error) {
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

// forEach visits the links in code order.
func (f *fakeLinks) forEach(fn func(l *link.Link) bool) error {
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

func (a fakeAdmin) Status() status.Cluster {
	return status.Cluster{NodeID: "fake", Nodes: []status.Node{}, Shards: []status.Group{}}
}
func (a fakeAdmin) Ready(context.Context) error              { return nil }
func (a fakeAdmin) RemoveNode(context.Context, string) error { return status.ErrUnknownNode }
func (a fakeAdmin) DrainNode(context.Context, string, bool) error {
	return status.ErrUnknownNode
}
func (a fakeAdmin) DrainStatus(string) (bool, int, error) { return false, 0, status.ErrUnknownNode }
func (a fakeAdmin) Leases() ([]status.Lease, error)       { return nil, nil }
func (a fakeAdmin) Digests() ([]status.Digest, error)     { return nil, nil }
func (a fakeAdmin) LiveNodes() int                        { return 1 }
func (a fakeAdmin) Backup(context.Context, io.Writer) (*backup.Manifest, error) {
	return nil, errors.New("the fake keeps no backups")
}
func (a fakeAdmin) Restore(context.Context, io.Reader, bool) (*backup.Report, error) {
	return nil, errors.New("the fake keeps no backups")
}
func (a fakeAdmin) ForEachLink(fn func(l *link.Link) bool) error {
	return a.links.forEach(fn)
}

func (a fakeAnalytics) Stats(_ context.Context, code string, q link.StatsQuery) (*link.Link, *link.Stats, error) {
	l, err := a.links.lookup(code)
	if err != nil {
		return nil, nil, err
	}
	st := &link.Stats{Since: l.CreatedAt}
	for t := q.From; t.Before(q.To); t = t.Add(q.Step) {
		st.Series = append(st.Series, link.StatsPoint{Time: t})
	}
	return l, st, nil
}

func (fakeAnalytics) ClickCount(context.Context, string) (uint64, error) { return 0, nil }

func (fakeAnalytics) Visits(context.Context, string, time.Time, time.Time, int) ([]link.Visit, link.Gathered, error) {
	return []link.Visit{}, link.Gathered{}, nil
}

func (fakeAnalytics) Orphans(context.Context, int) (link.OrphanSummary, link.Gathered) {
	return link.OrphanSummary{Top: []link.CodeCount{}}, link.Gathered{}
}

func (fakeAnalytics) IsBot(ua string) bool {
	return strings.Contains(strings.ToLower(ua), "bot") || strings.Contains(ua, "externalhit")
}

func (fakeAnalytics) Platform(string) string { return "" }

func (fakeAnalytics) Country(netip.Addr) string { return "unknown" }

func (f *fakeKeys) Authenticate(secret string) (apikey.Key, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if k, ok := f.keys[apikey.HashOf(secret)]; ok {
		return k, nil
	}
	return apikey.Key{}, apikey.ErrUnauthorized
}

func (f *fakeKeys) Key(id string) (apikey.Key, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range f.keys {
		if k.ID == id {
			return k, nil
		}
	}
	return apikey.Key{}, apikey.ErrNotFound
}

func (f *fakeKeys) List() ([]apikey.Key, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]apikey.Key, 0, len(f.keys))
	for _, k := range f.keys {
		out = append(out, k)
	}
	apikey.Sort(out)
	return out, nil
}

func (f *fakeKeys) Create(_ context.Context, req apikey.Request) (string, apikey.Key, error) {
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

func (f *fakeKeys) Revoke(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for h, k := range f.keys {
		if k.ID == id {
			delete(f.keys, h)
			return nil
		}
	}
	return apikey.ErrNotFound
}

func (f *fakeKeys) SetBlocked(_ context.Context, domain string, blocked bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if blocked {
		f.blocked[domain] = time.Now().UTC()
	} else {
		delete(f.blocked, domain)
	}
	return nil
}

func (f *fakeKeys) Blocklist() (map[string]time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]time.Time, len(f.blocked))
	for d, t := range f.blocked {
		out[d] = t
	}
	return out, nil
}

func (f *fakeKeys) Blocked(host string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return link.InDomains(f.blocked, host)
}

func (f *fakeKeys) BlockedURL(u string) bool {
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
func (f *fakeLinks) List(ctx context.Context, q link.ListQuery) (link.ListPage, error) {
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
func (f *fakeLinks) Tags(_ context.Context, owner string, limit int) ([]link.TagCount, bool, error) {
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

// enriched is an analytics role whose devices and countries are the real
// ones (package analytics), for tests of redirect rules over the fakes.
type enriched struct {
	httpapi.Analytics
	e *analytics.Enricher
}

func (a enriched) Platform(ua string) string { return a.e.Platform(ua) }

func (a enriched) Country(ip netip.Addr) string { return analytics.Country(ip) }

// liveNodes is an admin role that sees n() nodes alive.
type liveNodes struct {
	httpapi.Admin
	n func() int
}

func (a liveNodes) LiveNodes() int { return a.n() }
