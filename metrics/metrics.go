// Package metrics holds the node's Prometheus registry and collectors, and
// bridges hashicorp's go-metrics (raft, raft-boltdb, memberlist) into it.
package metrics

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/linkraft/linkraft/internal/connguard"
)

// Metrics is a private registry with linkraft's own collectors. It
// implements shard.Observer.
type Metrics struct {
	reg         *prometheus.Registry
	redirects   *prometheus.HistogramVec
	requests    *prometheus.HistogramVec
	cacheHits   *prometheus.CounterVec
	cacheMisses *prometheus.CounterVec
	apply       *prometheus.HistogramVec
	clicks      *prometheus.CounterVec // by outcome: recorded, dropped
	flushed     *prometheus.CounterVec // clicks acknowledged, by shard
	flushFails  *prometheus.CounterVec // batches resent, by shard
	orphans     prometheus.Counter
	relayed     *prometheus.CounterVec // forwarded writes passed on, by shard
	shardLabels []string

	// Children of the vectors on the redirect path, resolved once: a
	// WithLabelValues per request hashes the labels and takes a lock.
	redirectBy map[int]prometheus.Observer // by status, fixed at New
	recorded   prometheus.Counter
	dropped    prometheus.Counter
	hits       [maxShardChildren]atomic.Pointer[prometheus.Counter] // by shard, resolved on first use
	misses     [maxShardChildren]atomic.Pointer[prometheus.Counter]
}

// maxShardChildren is how many shards have their cache counters resolved
// once; shards past it (not a real deployment) look theirs up each time.
const maxShardChildren = 256

// latencyBuckets run from 50 µs to 5 s.
var latencyBuckets = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// New returns a registry with the Go runtime and process collectors and
// linkraft's own metrics.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		reg: reg,
		redirects: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "linkraft_redirect_duration_seconds", Help: "Time to answer a redirect request, by HTTP status.",
			Buckets: latencyBuckets,
		}, []string{"status"}),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "linkraft_http_request_duration_seconds", Help: "Time to answer an API request, by route, method and status.",
			Buckets: latencyBuckets,
		}, []string{"route", "method", "status"}),
		cacheHits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "linkraft_cache_hits_total", Help: "Link cache hits, by shard.",
		}, []string{"shard"}),
		cacheMisses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "linkraft_cache_misses_total", Help: "Link cache misses, by shard.",
		}, []string{"shard"}),
		apply: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "linkraft_apply_duration_seconds", Help: "Time from proposing a shard command to its applied result, by shard.",
			Buckets: latencyBuckets,
		}, []string{"shard"}),
		clicks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "linkraft_clicks_total", Help: "Redirects handed to the analytics pipeline (recorded) or dropped because it was full (dropped).",
		}, []string{"outcome"}),
		flushed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "linkraft_clicks_flushed_total", Help: "Clicks in click batches the shard acknowledged, by shard.",
		}, []string{"shard"}),
		orphans: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "linkraft_orphan_visits_total", Help: "Redirect requests for codes that do not exist.",
		}),
		flushFails: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "linkraft_click_batch_failures_total", Help: "Click batch submissions with an unknown outcome (resent), by shard.",
		}, []string{"shard"}),
		relayed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "linkraft_relayed_writes_total", Help: "Writes another node forwarded here that this node passed on to a third (a second hop), by shard.",
		}, []string{"shard"}),
	}
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.redirects, m.requests, m.cacheHits, m.cacheMisses, m.apply, m.clicks, m.flushed, m.flushFails, m.orphans, m.relayed,
	)
	m.redirectBy = map[int]prometheus.Observer{}
	for _, status := range []int{200, 301, 302, 307, 308, 404, 410, 500, 503} {
		m.redirectBy[status] = m.redirects.WithLabelValues(statusLabel(status))
	}
	m.recorded, m.dropped = m.clicks.WithLabelValues("recorded"), m.clicks.WithLabelValues("dropped")
	m.shardLabels = make([]string, 256)
	for i := range m.shardLabels {
		m.shardLabels[i] = strconv.Itoa(i)
	}
	return m
}

// Registry returns the registry, for bridges and tests.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

func (m *Metrics) shard(id int) string {
	if id >= 0 && id < len(m.shardLabels) {
		return m.shardLabels[id]
	}
	return strconv.Itoa(id)
}

// CacheHit implements shard.Observer.
func (m *Metrics) CacheHit(shard int) { m.shardCounter(&m.hits, m.cacheHits, shard).Inc() }

// CacheMiss implements shard.Observer.
func (m *Metrics) CacheMiss(shard int) { m.shardCounter(&m.misses, m.cacheMisses, shard).Inc() }

// shardCounter is vec's child for shard, resolved once per shard.
func (m *Metrics) shardCounter(children *[maxShardChildren]atomic.Pointer[prometheus.Counter], vec *prometheus.CounterVec, shard int) prometheus.Counter {
	if shard < 0 || shard >= maxShardChildren {
		return vec.WithLabelValues(m.shard(shard))
	}
	if c := children[shard].Load(); c != nil {
		return *c
	}
	c := vec.WithLabelValues(m.shard(shard))
	children[shard].Store(&c)
	return c
}

// Applied implements shard.Observer.
func (m *Metrics) Applied(shard int, d time.Duration) {
	m.apply.WithLabelValues(m.shard(shard)).Observe(d.Seconds())
}

// Relayed implements shard.Observer.
func (m *Metrics) Relayed(shard int) { m.relayed.WithLabelValues(m.shard(shard)).Inc() }

// Redirect records one redirect answer.
func (m *Metrics) Redirect(status int, d time.Duration) {
	if o, ok := m.redirectBy[status]; ok {
		o.Observe(d.Seconds())
		return
	}
	m.redirects.WithLabelValues(statusLabel(status)).Observe(d.Seconds())
}

// Request records one API answer.
func (m *Metrics) Request(route, method string, status int, d time.Duration) {
	m.requests.WithLabelValues(route, method, statusLabel(status)).Observe(d.Seconds())
}

func statusLabel(code int) string {
	switch code {
	case 200:
		return "200"
	case 301:
		return "301"
	case 302:
		return "302"
	case 307:
		return "307"
	case 308:
		return "308"
	case 404:
		return "404"
	case 410:
		return "410"
	}
	return strconv.Itoa(code)
}

// ClickRecorded counts a click handed to the analytics pipeline.
func (m *Metrics) ClickRecorded() { m.recorded.Inc() }

// ClickDropped counts a click the full pipeline could not take.
func (m *Metrics) ClickDropped() { m.dropped.Inc() }

// ClicksFlushed counts clicks in an acknowledged batch.
func (m *Metrics) ClicksFlushed(shard, clicks int) {
	m.flushed.WithLabelValues(m.shard(shard)).Add(float64(clicks))
}

// ClickFlushFailed counts a batch submission with an unknown outcome.
func (m *Metrics) ClickFlushFailed(shard int) { m.flushFails.WithLabelValues(m.shard(shard)).Inc() }

// OrphanVisit counts a request for an unknown code.
func (m *Metrics) OrphanVisit() { m.orphans.Inc() }

// NodeGauges are read from the node at each scrape.
type NodeGauges struct {
	// StorageAlarm reports the storage alarm (cluster/space.go).
	StorageAlarm func() bool
	// StorageUsed and StorageFree are the data dir's bytes and the free
	// bytes of its file system.
	StorageUsed, StorageFree func() int64
	// VisitBytes is the raw visit file's live bytes and VisitsShed the raw
	// visits shed past its budget since start.
	VisitBytes func() int64
	VisitsShed func() uint64
	// PeerRefused counts peer-port connections closed by its limits.
	PeerRefused func() uint64
	// Rejected counts committed entries rejected by this node's replicas.
	Rejected func() uint64
	// Halted and Stalled count groups whose apply is halted (an unknown
	// command type) or stalled (a failing commit) on this node.
	Halted, Stalled func() int
	// RaftLog returns the commits of the node's shared Raft log and the
	// writes they held (zeros below the shared log's feature level).
	RaftLog func() (commits, writes uint64)
	// RaftLogSegments returns the segment files of the node's shared Raft
	// log and their bytes (zeros below its feature level).
	RaftLogSegments func() (n int, bytes int64)
}

// RegisterNode registers the node gauges.
func (m *Metrics) RegisterNode(g NodeGauges) error {
	b2f := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	cs := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "linkraft_storage_alarm", Help: "1 while this node refuses writes that grow the state: its data dir is over -quota-bytes or its disk under -min-free-bytes."},
			func() float64 { return b2f(g.StorageAlarm()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "linkraft_storage_used_bytes", Help: "Bytes of link data in the node's data dir (Raft logs, snapshots, state files; bbolt free pages and raw visits not counted), at the last check."},
			func() float64 { return float64(g.StorageUsed()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "linkraft_storage_free_bytes", Help: "Free bytes of the data dir's file system, at the last check."},
			func() float64 { return float64(g.StorageFree()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "linkraft_visit_bytes", Help: "Live bytes of the node's raw visit file (not counted in linkraft_storage_used_bytes), at the last check."},
			func() float64 { return float64(g.VisitBytes()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "linkraft_visits_shed_total", Help: "Raw visits not stored because the visit file was at -visits-max-bytes or the disk near -min-free-bytes (click counts are not affected)."},
			func() float64 { return float64(g.VisitsShed()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "linkraft_peer_conns_refused_total", Help: "Peer-port connections closed by its limits on pending handshakes (in all, per source address or IPv6 /64) or open connections."},
			func() float64 { return float64(g.PeerRefused()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "linkraft_fsm_rejected_entries_total", Help: "Committed entries this node's replicas rejected (failed to decode or validate)."},
			func() float64 { return float64(g.Rejected()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "linkraft_fsm_halted_groups", Help: "Groups whose apply stopped at a command type this version does not know (upgrade the node)."},
			func() float64 { return float64(g.Halted()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "linkraft_fsm_stalled_groups", Help: "Groups whose commit keeps failing (a full disk) and is being retried."},
			func() float64 { return float64(g.Stalled()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "linkraft_raft_log_commits_total", Help: "Commits of the node's Raft log, shared by its groups (each one write and one fdatasync)."},
			func() float64 { c, _ := g.RaftLog(); return float64(c) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "linkraft_raft_log_writes_total", Help: "Writes (appends, compactions, votes, of any group) in those commits: writes per commit is the group commit's batch."},
			func() float64 { _, w := g.RaftLog(); return float64(w) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "linkraft_raft_log_segments", Help: "Segment files of the node's Raft log (old ones go once nothing in them is live)."},
			func() float64 { n, _ := g.RaftLogSegments(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "linkraft_raft_log_bytes", Help: "Bytes of records in the node's Raft log's segments."},
			func() float64 { _, b := g.RaftLogSegments(); return float64(b) }),
	}
	for _, c := range cs {
		if err := m.reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// RegisterConnGuard registers the counters of a guarded HTTP listener
// (internal/connguard) under the label listener=name.
func (m *Metrics) RegisterConnGuard(name string, stats func() connguard.Stats) {
	l := prometheus.Labels{"listener": name}
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "linkraft_http_conns_open", Help: "HTTP connections open now.", ConstLabels: l},
			func() float64 { return float64(stats().Open) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "linkraft_http_conns_idle_closed_total", Help: "Idle HTTP connections closed early because the listener was under pressure (three quarters of -max-conns).", ConstLabels: l},
			func() float64 { return float64(stats().IdleClosed) }),
	)
	for _, r := range []connguard.Reason{connguard.PerClient, connguard.Full} {
		rl := prometheus.Labels{"listener": name, "reason": r.String()}
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "linkraft_http_conns_refused_total",
			Help: "HTTP connections refused: reason per_client (the client's cap) or full (every slot, or every slot but those kept for health checks).", ConstLabels: rl},
			func() float64 { return float64(stats().Refused[r]) }))
	}
}
