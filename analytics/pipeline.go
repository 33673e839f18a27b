package analytics

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/axiomhq/hyperloglog"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/link"
)

// Observer receives the pipeline's counters (implemented by
// metrics.Metrics); every method must be cheap and safe for concurrent use.
type Observer interface {
	ClickRecorded()
	ClickDropped()
	ClicksFlushed(shard int, clicks int)
	ClickFlushFailed(shard int)
	OrphanVisit()
}

// Config configures a Pipeline.
type Config struct {
	// Node is this node's ID: batches are sequenced per node.
	Node string
	// Shard maps a code to its shard.
	Shard func(code string) command.ShardID
	// Submit proposes a batch through the shard's Raft group. An error
	// means the outcome is unknown: the same batch (same node and sequence
	// number) is submitted again.
	Submit func(ctx context.Context, shard command.ShardID, b *command.ClickBatch) error
	// Salt returns the visitor-hash salt of a UTC day; the same on every
	// node, so a visitor seen by two nodes counts once. Nil: no uniques.
	Salt func(day time.Time) []byte
	// Enricher classifies clicks (default: a new one).
	Enricher *Enricher
	// Visits, if set, receives raw visits (anonymised; none for private
	// clicks).
	Visits *VisitStore
	// VisitFlushInterval is how often raw visits are written (default 5 s:
	// they are a local, best-effort record, and larger transactions cost
	// far less per visit than one a second).
	VisitFlushInterval time.Duration
	// VisitBuffer bounds the raw visits held between writes (default
	// 100,000); the buffer is written early once half full, so visits are
	// dropped only if the disk falls behind.
	VisitBuffer int
	// Capacity bounds the clicks waiting for the pipeline (default 65536).
	Capacity int
	// FlushInterval is how often batches are submitted (default 1 s).
	FlushInterval time.Duration
	// SubmitTimeout bounds one submission (default 5 s).
	SubmitTimeout time.Duration
	// Observer, if set, receives counters.
	Observer Observer
	// Logger receives flush failures.
	Logger *slog.Logger
	// Seq0 is the first batch sequence number (default: the Unix time in
	// nanoseconds at start, so a restarted node goes on above its old
	// batches as long as the clock does not jump back by more than the
	// node's uptime).
	Seq0 uint64
}

// Pipeline is a node's click pipeline.
type Pipeline struct {
	cfg Config
	seq atomic.Uint64
	// queued counts clicks handed over but not yet aggregated; it drops
	// under mu together with the aggregate's count growing, so Pending
	// never misses a click in transit.
	queued atomic.Int64

	// The inbox: handlers append under inMu (a lock and a copy per click,
	// where a channel cost the pipeline a wake-up and a select per click);
	// the pipeline takes the whole slice at once and gives back the one it
	// emptied. wake is signalled when the inbox stops being empty.
	inMu    sync.Mutex
	inBuf   []link.Click
	inSpare []link.Click
	wake    chan struct{}

	// visitsMu is held through a write of raw visits.
	visitsMu sync.Mutex

	mu       sync.Mutex
	shards   map[command.ShardID]*shardState
	visitBuf *VisitBatch
	// spareVisits is the other visit buffer, while visitBuf fills.
	spareVisits *VisitBatch
	// Per-click work memoised under mu: the day's salt, referrer hosts.
	saltDay  time.Time
	salt     []byte
	visitsAt time.Time // last write of raw visits
	refMemo  map[string]string
	free     []*agg // aggs of past batches, for reuse
	codes    []string

	orphanMu    sync.Mutex
	orphans     map[string]uint64
	orphanTotal uint64
	// orphansNew and orphansNewTotal are the counts not yet added to the
	// visit file.
	orphansNew      map[string]uint64
	orphansNewTotal uint64

	stop   chan struct{}
	done   chan struct{}
	closed atomic.Bool
}

// shardState is one shard's clicks: those being aggregated, and the batch
// submitted but not yet acknowledged (sent again until it is, before any
// later batch, so sequence order is application order).
type shardState struct {
	acc        map[string]*agg
	accN       int
	pending    *command.ClickBatch
	pendingSeq uint64
	pendingN   int
	inFlight   bool
}

// agg is one code's clicks since the last batch, kept without a map per
// code: breakdown counts are a short list searched in place (an index is
// built if the list grows long), and aggs are reused from batch to batch.
type agg struct {
	total   [2]uint64 // humans, bots
	entries []aggEntry
	index   map[aggKey]int
	hours   []command.HourCount
	sketch  [2]*hyperloglog.Sketch
}

// aggEntry is one breakdown count: clicks of humans or bots under key in
// dimension Dim (command.DimCountry ...).
type aggEntry struct {
	bot bool
	Dim int
	Key string
	N   uint64
}

type aggKey struct {
	bot bool
	dim int
	key string
}

// linearEntries is how long an agg's breakdown list grows before it gets
// an index.
const linearEntries = 32

// count adds one click to the breakdown (bot, dim, key).
func (g *agg) count(bot bool, dim int, key string) {
	if g.index == nil {
		for i := range g.entries {
			e := &g.entries[i]
			if e.bot == bot && e.Dim == dim && e.Key == key {
				e.N++
				return
			}
		}
		g.entries = append(g.entries, aggEntry{bot: bot, Dim: dim, Key: key, N: 1})
		if len(g.entries) > linearEntries {
			g.index = make(map[aggKey]int, 2*len(g.entries))
			for i, e := range g.entries {
				g.index[aggKey{e.bot, e.Dim, e.Key}] = i
			}
		}
		return
	}
	k := aggKey{bot, dim, key}
	if i, ok := g.index[k]; ok {
		g.entries[i].N++
		return
	}
	g.index[k] = len(g.entries)
	g.entries = append(g.entries, aggEntry{bot: bot, Dim: dim, Key: key, N: 1})
}

func (g *agg) hour(h uint64, bot bool) {
	i := len(g.hours) - 1
	for ; i >= 0 && g.hours[i].Hour != h; i-- {
	}
	if i < 0 {
		g.hours = append(g.hours, command.HourCount{Hour: h})
		i = len(g.hours) - 1
	}
	if bot {
		g.hours[i].Bots++
	} else {
		g.hours[i].Humans++
	}
}

func (g *agg) reset() {
	g.total = [2]uint64{}
	g.entries, g.hours = g.entries[:0], g.hours[:0]
	g.index = nil
	g.sketch = [2]*hyperloglog.Sketch{}
}

// New starts a pipeline; Close stops it.
func New(cfg Config) (*Pipeline, error) {
	if cfg.Node == "" || cfg.Shard == nil || cfg.Submit == nil {
		return nil, errors.New("analytics: Config needs Node, Shard and Submit")
	}
	if cfg.Enricher == nil {
		cfg.Enricher = NewEnricher()
	}
	if cfg.Capacity <= 0 {
		cfg.Capacity = 1 << 16
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = time.Second
	}
	if cfg.VisitFlushInterval <= 0 {
		cfg.VisitFlushInterval = 5 * time.Second
	}
	if cfg.VisitBuffer <= 0 {
		cfg.VisitBuffer = 100_000
	}
	if cfg.SubmitTimeout <= 0 {
		cfg.SubmitTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Seq0 == 0 {
		cfg.Seq0 = uint64(time.Now().UnixNano())
	}
	p := &Pipeline{cfg: cfg, wake: make(chan struct{}, 1), shards: map[command.ShardID]*shardState{}, orphans: map[string]uint64{},
		orphansNew: map[string]uint64{}, visitBuf: &VisitBatch{}, stop: make(chan struct{}), done: make(chan struct{})}
	if cfg.Visits != nil {
		// The counts of earlier runs: at most maxOrphanCodes codes were
		// stored one by one (RecordOrphan), so the bound holds.
		counts, total, err := cfg.Visits.Orphans()
		if err != nil {
			return nil, err
		}
		p.orphans, p.orphanTotal = counts, total
	}
	p.seq.Store(cfg.Seq0)
	go p.run()
	return p, nil
}

// Record hands a click to the pipeline without waiting; if the pipeline is
// full (or closed) the click is dropped and counted as dropped.
func (p *Pipeline) Record(c link.Click) bool {
	if p.closed.Load() {
		p.dropped()
		return false
	}
	p.inMu.Lock()
	if len(p.inBuf) >= p.cfg.Capacity {
		p.inMu.Unlock()
		p.dropped()
		return false
	}
	p.queued.Add(1)
	p.inBuf = append(p.inBuf, c)
	first := len(p.inBuf) == 1
	p.inMu.Unlock()
	if first {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
	if o := p.cfg.Observer; o != nil {
		o.ClickRecorded()
	}
	return true
}

// drainPause is how long the pipeline lets clicks gather after taking the
// inbox: under load it takes hundreds at a time instead of waking per
// click; an idle node still takes a lone click at once.
const drainPause = 2 * time.Millisecond

// drainChunk bounds the clicks aggregated under one hold of mu.
const drainChunk = 4096

// drain takes the inbox and aggregates it. It reports whether there was
// anything to take.
func (p *Pipeline) drain() bool {
	p.inMu.Lock()
	batch := p.inBuf
	p.inBuf, p.inSpare = p.inSpare, nil
	p.inMu.Unlock()
	if len(batch) == 0 {
		p.inMu.Lock()
		if p.inSpare == nil {
			p.inSpare = batch
		}
		p.inMu.Unlock()
		return false
	}
	// Chunks of at most half the visit buffer: checked after each, the
	// buffer never fills.
	for chunk := batch; len(chunk) > 0; {
		n := min(len(chunk), drainChunk, max(p.cfg.VisitBuffer/2, 1))
		p.mu.Lock()
		for i := range chunk[:n] {
			p.add(&chunk[i])
		}
		p.queued.Add(-int64(n))
		p.mu.Unlock()
		chunk = chunk[n:]
		if p.cfg.Visits != nil && p.visitsFull() {
			p.writeVisits()
		}
	}
	clear(batch) // let go of the strings
	p.inMu.Lock()
	if p.inSpare == nil {
		p.inSpare = batch[:0]
	}
	p.inMu.Unlock()
	return true
}

// visitsFull reports whether the raw-visit buffer is half way to its bound:
// it is written early rather than drop visits at a high click rate.
func (p *Pipeline) visitsFull() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.visitBuf.Len() >= p.cfg.VisitBuffer/2
}

func (p *Pipeline) dropped() {
	if o := p.cfg.Observer; o != nil {
		o.ClickDropped()
	}
}

func (p *Pipeline) run() {
	defer close(p.done)
	t := time.NewTicker(p.cfg.FlushInterval)
	defer t.Stop()
	pause := time.NewTimer(drainPause)
	defer pause.Stop()
	for {
		select {
		case <-p.wake:
			if p.drain() {
				pause.Reset(drainPause)
				select {
				case <-pause.C:
				case <-p.stop:
				}
			}
		case <-t.C:
			p.drain()
			p.flush(false)
			if time.Since(p.visitsAt) >= p.cfg.VisitFlushInterval {
				p.writeVisits()
			}
		case <-p.stop:
			// Take what is queued, then stop; Close flushes.
			p.drain()
			return
		}
	}
}

// add enriches and aggregates one click; the caller holds mu and lowers
// queued.
func (p *Pipeline) add(c *link.Click) {
	a := p.cfg.Enricher.Agent(c.UA)
	country := Country(c.IP)
	shard := p.cfg.Shard(c.Code)
	ref, ok := p.refMemo[c.Referer]
	if !ok {
		ref = RefererHost(c.Referer)
		if p.refMemo == nil || len(p.refMemo) >= maxMemo {
			p.refMemo = map[string]string{}
		}
		p.refMemo[c.Referer] = ref
	}
	st := p.shards[shard]
	if st == nil {
		st = &shardState{acc: map[string]*agg{}}
		p.shards[shard] = st
	}
	g := st.acc[c.Code]
	if g == nil {
		if n := len(p.free); n > 0 {
			g, p.free = p.free[n-1], p.free[:n-1]
		} else {
			g = &agg{}
		}
		st.acc[c.Code] = g
	}
	st.accN++
	aud := 0
	if a.Bot {
		aud = 1
	}
	g.total[aud]++
	g.count(a.Bot, command.DimCountry, country)
	g.count(a.Bot, command.DimDevice, a.Device)
	g.count(a.Bot, command.DimBrowser, a.Browser)
	g.count(a.Bot, command.DimOS, a.OS)
	g.count(a.Bot, command.DimReferrer, ref)
	g.hour(uint64(max(c.Time.Unix(), 0))/3600, a.Bot)
	if p.cfg.Visits != nil && !c.Private && p.visitBuf.Len() < p.cfg.VisitBuffer {
		p.visitBuf.Append(&link.Visit{
			Code: c.Code, Time: c.Time.UTC(), Node: p.cfg.Node, Network: networkOf(c.IP), Country: country,
			UserAgent: c.UA, Referer: stripQuery(c.Referer), Bot: a.Bot,
		})
	}
	if !c.Private && p.cfg.Salt != nil && c.IP.IsValid() {
		sk := &g.sketch[aud]
		if *sk == nil {
			*sk = hyperloglog.New14()
		}
		(*sk).InsertHash(p.visitorHash(c))
	}
}

// visitorHash is SHA-256(salt of the day, IP, UA), first 8 bytes: it cannot
// be turned back into an IP without the salt, and the salt changes daily.
// Called under mu (the salt is cached for the day).
func (p *Pipeline) visitorHash(c *link.Click) uint64 {
	day := c.Time.UTC().Truncate(24 * time.Hour)
	if p.salt == nil || !day.Equal(p.saltDay) {
		p.saltDay, p.salt = day, p.cfg.Salt(day)
	}
	var buf [128]byte
	b := append(buf[:0], p.salt...)
	b = append(b, c.IP.Unmap().AsSlice()...)
	b = append(b, 0)
	b = append(b, c.UA...)
	sum := sha256.Sum256(b)
	return binary.BigEndian.Uint64(sum[:8])
}

// flush submits, per shard, the pending batch or a new one made of what has
// accumulated. With wait it submits synchronously (Close); otherwise each
// shard's submission runs on its own so one slow shard delays no other.
func (p *Pipeline) flush(wait bool) {
	p.mu.Lock()
	var wg sync.WaitGroup
	for shard, st := range p.shards {
		if st.inFlight {
			continue
		}
		if st.pending == nil && st.accN > 0 {
			st.pendingSeq = p.seq.Add(1)
			st.pending, st.pendingN = p.batch(st, st.pendingSeq), st.accN
			st.accN = 0
		}
		if st.pending == nil {
			continue
		}
		st.inFlight = true
		b, seq, n := st.pending, st.pendingSeq, st.pendingN
		wg.Go(func() { p.submit(shard, st, b, seq, n) })
	}
	p.mu.Unlock()
	if wait {
		wg.Wait()
	}
}

func (p *Pipeline) submit(shard command.ShardID, st *shardState, b *command.ClickBatch, seq uint64, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.SubmitTimeout)
	err := p.cfg.Submit(ctx, shard, b)
	cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	st.inFlight = false
	if err != nil {
		p.cfg.Logger.Debug("click batch not acknowledged; will resend", "shard", shard, "seq", seq, "err", err)
		if o := p.cfg.Observer; o != nil {
			o.ClickFlushFailed(int(shard))
		}
		return
	}
	st.pending, st.pendingN = nil, 0
	if o := p.cfg.Observer; o != nil {
		o.ClicksFlushed(int(shard), n)
	}
}

// batch turns a shard's aggregates into ClickBatch seq (codes in order,
// for locality in the replicas' B+trees) and empties them. Called under mu.
func (p *Pipeline) batch(st *shardState, seq uint64) *command.ClickBatch {
	p.codes = p.codes[:0]
	for code := range st.acc {
		p.codes = append(p.codes, code)
	}
	slices.Sort(p.codes)
	b := &command.ClickBatch{Node: p.cfg.Node, Seq: seq, Deltas: make([]command.ClickDelta, len(p.codes))}
	for i, code := range p.codes {
		g := st.acc[code]
		d := &b.Deltas[i]
		d.Code = code
		d.Delta.Humans.Total, d.Delta.Bots.Total = g.total[0], g.total[1]
		for _, e := range g.entries {
			c := &d.Delta.Humans
			if e.bot {
				c = &d.Delta.Bots
			}
			c.Add(e.Dim, e.Key, e.N)
		}
		for i, c := range []*command.Counts{&d.Delta.Humans, &d.Delta.Bots} {
			if sk := g.sketch[i]; sk != nil {
				if v, err := sk.MarshalBinary(); err == nil {
					c.Visitors = v
				}
			}
		}
		slices.SortFunc(g.hours, func(a, b command.HourCount) int { return cmp.Compare(a.Hour, b.Hour) })
		d.Hours = slices.Clone(g.hours)
		g.reset()
		if len(p.free) < maxFreeAggs {
			p.free = append(p.free, g)
		}
	}
	clear(st.acc)
	return b
}

// Pending reports how many clicks are not yet acknowledged (queued,
// aggregating, or in an unacknowledged batch).
func (p *Pipeline) Pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := int(p.queued.Load()) + p.visitBuf.Len()
	for _, st := range p.shards {
		n += st.accN + st.pendingN
	}
	return n
}

// Flush submits everything recorded so far and waits for the attempt (for
// tests and shutdown). It returns the clicks still unacknowledged.
func (p *Pipeline) Flush(ctx context.Context) int {
	for {
		p.drain() // the inbox into the aggregates first
		p.flush(true)
		p.writeVisits()
		left := p.Pending()
		if left <= 0 || ctx.Err() != nil {
			return left
		}
		select {
		case <-ctx.Done():
			return p.Pending()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// writeVisits stores the buffered raw visits in one transaction. Writes
// are one at a time, so once it returns every visit buffered before the
// call is stored (Flush relies on it).
func (p *Pipeline) writeVisits() {
	p.visitsMu.Lock()
	defer p.visitsMu.Unlock()
	p.mu.Lock()
	visits := p.visitBuf
	p.visitBuf, p.spareVisits = p.spareVisits, nil
	if p.visitBuf == nil {
		p.visitBuf = &VisitBatch{}
	}
	p.visitsAt = time.Now()
	p.mu.Unlock()
	if visits.Len() > 0 {
		if err := p.cfg.Visits.AddBatch(visits); err != nil {
			p.cfg.Logger.Warn("visits not stored", "count", visits.Len(), "err", err)
		}
	}
	p.writeOrphans()
	// The buffer is used again (two take turns): growing a fresh one to
	// tens of thousands of visits every flush was a good part of the cost.
	visits.Reset()
	p.mu.Lock()
	if p.spareVisits == nil {
		p.spareVisits = visits
	}
	p.mu.Unlock()
}

// writeOrphans adds the orphan counts since the last write to the visit
// file; on failure they are kept for the next write.
func (p *Pipeline) writeOrphans() {
	p.orphanMu.Lock()
	counts, total := p.orphansNew, p.orphansNewTotal
	p.orphansNew, p.orphansNewTotal = map[string]uint64{}, 0
	p.orphanMu.Unlock()
	if p.cfg.Visits == nil {
		return // counted in memory only
	}
	if err := p.cfg.Visits.AddOrphans(counts, total); err != nil {
		p.cfg.Logger.Warn("orphan counts not stored", "err", err)
		p.orphanMu.Lock()
		for c, n := range counts {
			p.orphansNew[c] += n
		}
		p.orphansNewTotal += total
		p.orphanMu.Unlock()
	}
}

// maxFreeAggs bounds the aggs kept for reuse.
const maxFreeAggs = 1 << 16

// maxOrphanCodes bounds the distinct unknown codes counted one by one.
const maxOrphanCodes = 10_000

func networkOf(ip netip.Addr) string {
	if !ip.IsValid() {
		return ""
	}
	a := Anonymize(ip)
	bits := 48
	if a.Is4() {
		bits = 24
	}
	return netip.PrefixFrom(a, bits).String()
}

// stripQuery drops a referrer's query and fragment (they may carry personal
// data) and bounds its length.
func stripQuery(ref string) string {
	if i := strings.IndexAny(ref, "?#"); i >= 0 {
		ref = ref[:i]
	}
	if len(ref) > 512 {
		ref = ref[:512]
	}
	return ref
}

// RecordOrphan counts a request for a code that does not exist.
func (p *Pipeline) RecordOrphan(code string) {
	p.orphanMu.Lock()
	p.orphanTotal++
	p.orphansNewTotal++
	if _, ok := p.orphans[code]; !ok && len(p.orphans) >= maxOrphanCodes {
		code = command.OtherKey
	}
	p.orphans[code]++
	p.orphansNew[code]++
	p.orphanMu.Unlock()
	if o := p.cfg.Observer; o != nil {
		o.OrphanVisit()
	}
}

// Orphans summarises the unknown codes this node was asked for (since its
// visit file was made; since it started without one): the total and the
// top codes.
func (p *Pipeline) Orphans(top int) link.OrphanSummary {
	p.orphanMu.Lock()
	defer p.orphanMu.Unlock()
	out := link.OrphanSummary{Total: p.orphanTotal, Top: []link.CodeCount{}}
	for c, n := range p.orphans {
		out.Top = append(out.Top, link.CodeCount{Code: c, Count: n})
	}
	SortCodeCounts(out.Top)
	if len(out.Top) > top {
		out.Top = out.Top[:top]
	}
	return out
}

// SortCodeCounts orders by count, then code.
func SortCodeCounts(cs []link.CodeCount) {
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].Count != cs[j].Count {
			return cs[i].Count > cs[j].Count
		}
		return cs[i].Code < cs[j].Code
	})
}

// ListVisits returns this node's visits of code (see VisitStore.List); an
// empty list when visit records are off.
func (p *Pipeline) ListVisits(code string, from, to time.Time, limit int) ([]link.Visit, error) {
	if p.cfg.Visits == nil {
		return []link.Visit{}, nil
	}
	return p.cfg.Visits.List(code, from, to, limit)
}

// Close stops taking clicks and flushes what it holds until ctx ends.
func (p *Pipeline) Close(ctx context.Context) error {
	if !p.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(p.stop)
	<-p.done
	if left := p.Flush(ctx); left > 0 {
		return errors.New("analytics: clicks left unflushed at shutdown")
	}
	return nil
}
