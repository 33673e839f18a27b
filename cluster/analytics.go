package cluster

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"net/netip"
	"path/filepath"
	"sort"
	"time"

	"github.com/linkraft/linkraft/analytics"
	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/link"
)

// Analytics is the node's click analytics role: a link's statistics from
// the replicated click state, raw visits and unknown-code counts gathered
// from every node, and what the redirect path hands clicks to.
type Analytics struct{ n *Node }

// Recorder is the node's click pipeline, where the HTTP layer records
// every redirect; nil when analytics is off.
func (a *Analytics) Recorder() *analytics.Pipeline { return a.n.clicks.pipeline }

// IsBot tells bots (link previews, crawlers, monitors) apart by their
// User-Agent: they are redirected without using up a limited link's
// visits, analytics on or off.
func (a *Analytics) IsBot(userAgent string) bool { return a.n.clicks.enricher.Agent(userAgent).Bot }

// Platform is the device a redirect rule names for userAgent
// (analytics.Enricher.Platform).
func (a *Analytics) Platform(userAgent string) string { return a.n.clicks.enricher.Platform(userAgent) }

// Country is the country a redirect rule and the statistics name for ip
// ("unknown" if none).
func (a *Analytics) Country(ip netip.Addr) string { return analytics.Country(ip) }

// Stats returns the click statistics of a live or deleted link as q asks,
// with the link they belong to (one lookup): from this node's replica of
// the shard if it hosts one, else from a replica that does. Counts lag the
// clicks by the flush interval and the replication delay.
// link.ErrNotFound if no link ever had the code.
func (a *Analytics) Stats(ctx context.Context, code string, q link.StatsQuery) (*link.Link, *link.Stats, error) {
	n := a.n
	ctx, cancel := withDefaultTimeout(ctx, 5*time.Second)
	defer cancel()
	l, err := n.router.lookup(ctx, n.host.locate(code), code, false, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := a.clickState(ctx, code, q.From, q.To)
	if err != nil {
		return nil, nil, err
	}
	return l, analytics.Summarize(st, q, l.CreatedAt), nil
}

// ClickCount returns the human clicks of code so far (the replicated
// counter, trailing the redirects by about a flush interval), without
// looking the link up: for a caller that has it already.
func (a *Analytics) ClickCount(ctx context.Context, code string) (uint64, error) {
	ctx, cancel := withDefaultTimeout(ctx, 5*time.Second)
	defer cancel()
	now := time.Now()
	st, err := a.clickState(ctx, code, now, now)
	if err != nil {
		return 0, err
	}
	return st.Totals.Humans.Total, nil
}

// clickState reads code's click totals and its hourly counts in
// [from, to) from a replica of its shard, this node's first.
func (a *Analytics) clickState(ctx context.Context, code string, from, to time.Time) (*command.ClickStats, error) {
	n := a.n
	s := n.host.locate(code)
	if sh := n.host.local(s); sh != nil {
		return sh.Clicks(code, from, to)
	}
	none := fmt.Errorf("%w: no replica of shard %d known", link.ErrUnavailable, s)
	return askReplicas(n, s, none, unavailable, func(addr string) (*command.ClickStats, error) {
		return n.peers.Clicks(ctx, addr, s, code, from, to)
	})
}

// Visits gathers the raw visits of code in [from, to) from every node (each
// keeps its own), newest first, at most limit; nodes that do not answer
// within ctx (default 2 s) make the answer partial.
func (a *Analytics) Visits(ctx context.Context, code string, from, to time.Time, limit int) ([]link.Visit, link.Gathered, error) {
	n := a.n
	ctx, cancel := withDefaultTimeout(ctx, 2*time.Second)
	defer cancel()
	visits, err := n.clicks.visits(code, from, to, limit)
	if err != nil {
		return nil, link.Gathered{}, err
	}
	answers, g := gather(ctx, n, func(addr string) ([]link.Visit, error) { return n.peers.Visits(ctx, addr, code, from, to, limit) })
	for _, a := range answers {
		visits = append(visits, a...)
	}
	sort.SliceStable(visits, func(i, j int) bool { return visits[i].Time.After(visits[j].Time) })
	if len(visits) > limit {
		visits = visits[:limit]
	}
	return visits, g, nil
}

// Orphans sums the unknown-code counts of every node.
func (a *Analytics) Orphans(ctx context.Context, top int) (link.OrphanSummary, link.Gathered) {
	n := a.n
	ctx, cancel := withDefaultTimeout(ctx, 2*time.Second)
	defer cancel()
	// Each node sends more than top, so the sum's top is closer to right.
	local := n.clicks.orphans(top * 4)
	answers, g := gather(ctx, n, func(addr string) (*link.OrphanSummary, error) { return n.peers.Orphans(ctx, addr, top*4) })
	byCode := map[string]uint64{}
	total := local.Total
	for _, c := range local.Top {
		byCode[c.Code] += c.Count
	}
	for _, a := range answers {
		total += a.Total
		for _, c := range a.Top {
			byCode[c.Code] += c.Count
		}
	}
	out := link.OrphanSummary{Total: total, Top: []link.CodeCount{}}
	for c, k := range byCode {
		out.Top = append(out.Top, link.CodeCount{Code: c, Count: k})
	}
	sort.Slice(out.Top, func(i, j int) bool {
		if out.Top[i].Count != out.Top[j].Count {
			return out.Top[i].Count > out.Top[j].Count
		}
		return out.Top[i].Code < out.Top[j].Code
	})
	if len(out.Top) > top {
		out.Top = out.Top[:top]
	}
	return out, g
}

// gather calls ask with every member but this node (in parallel, each
// bounded by ctx) and returns the answers of those that replied.
func gather[T any](ctx context.Context, n *Node, ask func(addr string) (T, error)) ([]T, link.Gathered) {
	var g link.Gathered
	type answer struct {
		id  string
		v   T
		err error
	}
	var asked []nodeAddr
	for _, m := range n.admin.nodes() {
		if m.ID != n.cfg.NodeID {
			asked = append(asked, nodeAddr{m.ID, m.RaftAddr, m.Status})
		}
	}
	ch := make(chan answer, len(asked))
	for _, m := range asked {
		go func() {
			if m.addr == "" || m.status == "failed" {
				ch <- answer{id: m.id, err: fmt.Errorf("%w: %s is down", link.ErrUnavailable, m.id)}
				return
			}
			v, err := ask(m.addr)
			ch <- answer{id: m.id, v: v, err: err}
		}()
	}
	var out []T
	for range asked {
		a := <-ch
		if a.err != nil {
			g.Partial = true
			g.Missing = append(g.Missing, a.id)
			continue
		}
		out = append(out, a.v)
	}
	return out, g
}

type nodeAddr struct{ id, addr, status string }

// clickPipeline is the node's click pipeline and visit store (package
// analytics), nil when analytics is off, and the enricher that tells bots
// and devices apart either way.
type clickPipeline struct {
	n         *Node
	pipeline  *analytics.Pipeline
	store     *analytics.VisitStore
	stopPurge func() // stops the visit purge loop and waits for it
	enricher  *analytics.Enricher
}

// open starts the pipeline (and the visit store) if configured. The
// pipeline asks for a click's shard and the day's salt only when it
// aggregates a click, and clicks arrive only once Open has returned and
// the HTTP server runs, by when the ring and the settings are known.
func (c *clickPipeline) open() error {
	n := c.n
	c.enricher = analytics.NewEnricher()
	cfg := n.cfg.Analytics // a copy with defaults, made by New
	if cfg == nil {
		return nil
	}
	if cfg.Visits {
		lim := analytics.VisitLimits{MaxBytes: max(cfg.VisitMaxBytes, 0)}
		if n.cfg.MinFreeBytes > 0 {
			lim.MinFree = 2 * n.cfg.MinFreeBytes
		}
		store, err := analytics.OpenVisitStore(filepath.Join(n.cfg.DataDir, visitFile), lim)
		if err != nil {
			return err
		}
		c.store = store
		purgeCtx, stop := context.WithCancel(context.Background())
		purged := make(chan struct{})
		c.stopPurge = func() { stop(); <-purged }
		go func() {
			defer close(purged)
			store.RunPurge(purgeCtx, cfg.VisitRetention, time.Hour, n.log.With("component", "visits"))
		}()
	}
	p, err := analytics.New(analytics.Config{
		Node: n.cfg.NodeID, Shard: n.host.locate, Submit: c.submit, Salt: c.visitorSalt,
		Enricher: c.enricher, Visits: c.store, Capacity: cfg.Buffer, FlushInterval: cfg.FlushInterval,
		Observer: cfg.Observer, Logger: n.log.With("component", "analytics"),
	})
	if err != nil {
		return err // Open's Close closes the visit store
	}
	c.pipeline = p
	return nil
}

// visitUse returns the raw visit file's live bytes, its budget (-1: none)
// and the visits shed since the node started; zeros without a file.
func (c *clickPipeline) visitUse() (used, budget int64, shed uint64) {
	s := c.store
	if s == nil {
		return 0, 0, 0
	}
	budget = s.Limits().MaxBytes
	if budget == 0 {
		budget = -1
	}
	return s.UsedBytes(), budget, s.Shed()
}

// close submits the last batches (the groups still run) and closes the
// visit store.
func (c *clickPipeline) close() error {
	var err error
	if c.pipeline != nil {
		ctx, cancel := context.WithTimeout(context.Background(), c.n.cfg.Analytics.CloseTimeout)
		if cerr := c.pipeline.Close(ctx); cerr != nil {
			c.n.log.Warn("analytics: last click batches not submitted", "err", cerr)
		}
		cancel()
	}
	if c.store != nil {
		c.stopPurge()
		err = c.store.Close()
	}
	return err
}

// submit proposes a click batch through shard s's Raft group (on its
// leader, forwarded if need be). An error means the outcome is unknown;
// the caller resends the same batch, which the FSM applies at most once.
func (c *clickPipeline) submit(ctx context.Context, s command.ShardID, b *command.ClickBatch) error {
	if err, ok := c.n.faultSubmitClicks(ctx, s, b); ok {
		return err
	}
	_, err := c.n.router.apply(ctx, s.Group(), b.Encode(), 0)
	return err
}

// visitorSalt is the salt of visitor hashes on a UTC day: an HMAC of the
// day under a key derived from the cluster's secret code key, so every
// node agrees on it (a visitor counts once whichever node they reach) and
// it changes daily (hashes of different days cannot be linked).
func (c *clickPipeline) visitorSalt(day time.Time) []byte {
	mac := hmac.New(sha256.New, c.n.host.settings.CodeKey)
	mac.Write([]byte("linkraft visitor salt\x00"))
	mac.Write([]byte(day.UTC().Format("2006-01-02")))
	return mac.Sum(nil)
}

// visits returns this node's raw visits of code.
func (c *clickPipeline) visits(code string, from, to time.Time, limit int) ([]link.Visit, error) {
	if c.pipeline == nil {
		return []link.Visit{}, nil
	}
	return c.pipeline.ListVisits(code, from, to, limit)
}

// orphans returns this node's unknown-code counts.
func (c *clickPipeline) orphans(top int) link.OrphanSummary {
	if c.pipeline == nil {
		return link.OrphanSummary{Top: []link.CodeCount{}}
	}
	return c.pipeline.Orphans(top)
}
