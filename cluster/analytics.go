package cluster

import (
	"context"
	"path/filepath"
	"time"

	"github.com/linkraft/linkraft/analytics"
	"github.com/linkraft/linkraft/link"
)

// AnalyticsConfig configures a node's click pipeline (package analytics):
// clicks are aggregated per shard and code and submitted through the
// shards' Raft groups; raw visits and unknown-code counts stay on the node.
type AnalyticsConfig struct {
	// Visits keeps raw visit records in <DataDir>/visits.db.
	Visits bool
	// VisitRetention is how long raw visits are kept (default 30 days).
	VisitRetention time.Duration
	// Buffer bounds the clicks waiting for the pipeline (default 65536).
	Buffer int
	// FlushInterval is how often batches are submitted (default 1 s).
	FlushInterval time.Duration
	// CloseTimeout bounds the last flush when the node closes (default 5 s).
	CloseTimeout time.Duration
	// Observer, if set, receives the pipeline's counters.
	Observer analytics.Observer
}

// withDefaults returns a copy of c with its defaults filled in.
func (c AnalyticsConfig) withDefaults() *AnalyticsConfig {
	if c.VisitRetention <= 0 {
		c.VisitRetention = 30 * 24 * time.Hour
	}
	if c.CloseTimeout <= 0 {
		c.CloseTimeout = 5 * time.Second
	}
	return &c
}

// openAnalytics starts the pipeline (and the visit store) if configured.
// The pipeline asks for a click's shard and the day's salt only when it
// aggregates a click, and clicks arrive only once Open has returned and
// the HTTP server runs, by when the ring and the settings are known.
func (n *Node) openAnalytics() error {
	n.enricher = analytics.NewEnricher()
	cfg := n.cfg.Analytics // a copy with defaults, made by New
	if cfg == nil {
		return nil
	}
	log := n.log.With("component", "analytics")
	if cfg.Visits {
		store, err := analytics.OpenVisitStore(filepath.Join(n.cfg.DataDir, "visits.db"))
		if err != nil {
			return err
		}
		n.visits = store
		purgeCtx, stop := context.WithCancel(context.Background())
		purged := make(chan struct{})
		n.stopPurge = func() { stop(); <-purged }
		go func() {
			defer close(purged)
			store.RunPurge(purgeCtx, cfg.VisitRetention, time.Hour, n.log.With("component", "visits"))
		}()
	}
	p, err := analytics.New(analytics.Config{
		Node: n.cfg.NodeID, Shard: n.shardOf, Submit: n.submitClicks, Salt: n.visitorSalt,
		Enricher: n.enricher, Visits: n.visits, Capacity: cfg.Buffer, FlushInterval: cfg.FlushInterval,
		Observer: cfg.Observer, Logger: log,
	})
	if err != nil {
		return err // Open's Close closes the visit store
	}
	n.clicks = p
	return nil
}

// closeAnalytics submits the last batches (the groups still run) and
// closes the visit store.
func (n *Node) closeAnalytics() error {
	var err error
	if n.clicks != nil {
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.Analytics.CloseTimeout)
		if cerr := n.clicks.Close(ctx); cerr != nil {
			n.log.Warn("analytics: last click batches not submitted", "err", cerr)
		}
		cancel()
	}
	if n.visits != nil {
		n.stopPurge()
		err = n.visits.Close()
	}
	return err
}

// Clicks is the node's click pipeline, or nil when analytics is off. The
// HTTP layer records every redirect there.
func (n *Node) Clicks() *analytics.Pipeline { return n.clicks }

// IsBot tells bots (link previews, crawlers, monitors) apart by their
// User-Agent: they are redirected without using up a limited link's
// visits, analytics on or off.
func (n *Node) IsBot(userAgent string) bool { return n.enricher.Agent(userAgent).Bot }

// Platform is the device a redirect rule names for userAgent
// (analytics.Enricher.Platform).
func (n *Node) Platform(userAgent string) string { return n.enricher.Platform(userAgent) }

func (n *Node) localVisits(code string, from, to time.Time, limit int) ([]link.Visit, error) {
	if n.clicks == nil {
		return []link.Visit{}, nil
	}
	return n.clicks.ListVisits(code, from, to, limit)
}

func (n *Node) localOrphans(top int) link.OrphanSummary {
	if n.clicks == nil {
		return link.OrphanSummary{Top: []link.CodeCount{}}
	}
	return n.clicks.Orphans(top)
}
