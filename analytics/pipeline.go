package analytics

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"log/slog"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

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
	// FlushInterval is how often each shard's batch is submitted (default
	// 1 s); the shards' submissions are spread over it (flushSlots).
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
	// the pipeline takes the whole inbox at once and gives back the one it
	// emptied. wake is signalled when the inbox stops being empty.
	inMu    sync.Mutex
	in      *inbox
	inSpare *inbox
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
	// shedLogged is when shed raw visits were last logged (under
	// visitsMu).
	shedLogged time.Time
	refMemo    map[string]string
	free       []*agg // aggs of past batches, for reuse
	codes      []string

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

// inbox is clicks handed over and not yet aggregated: fixed-size records
// and their strings' bytes back to back, so that a click costs the
// handler no allocation (once the inbox has grown to the load) and the
// garbage collector finds nothing to scan in it.
type inbox struct {
	clicks []inClick
	bytes  []byte
}

// inClick is a click in an inbox; its strings are spans of the inbox's
// bytes.
type inClick struct {
	time          time.Time
	ip            netip.Addr
	code, ua, ref span
	private       bool
}

// span is a string in an inbox's bytes.
type span struct{ off, n uint32 }

// put appends s to the inbox's bytes.
func (in *inbox) put(s string) span {
	sp := span{uint32(len(in.bytes)), uint32(len(s))}
	in.bytes = append(in.bytes, s...)
	return sp
}

// view is the string of sp, a view of the inbox's bytes: valid until the
// inbox is reset, so whatever keeps one copies it (aggregate keys, memos).
func (in *inbox) view(sp span) string {
	if sp.n == 0 {
		return ""
	}
	return unsafe.String(&in.bytes[sp.off], int(sp.n))
}

// keptInboxBytes is the most an emptied inbox keeps of its arena: a flood
// of clicks with long User-Agents and Referers (up to Capacity of them,
// 1.5 KiB each) grows one to about 100 MiB, which goes back to the garbage
// collector instead of staying with the node.
const keptInboxBytes = 4 << 20

func (in *inbox) reset() {
	in.clicks, in.bytes = in.clicks[:0], in.bytes[:0]
	if cap(in.bytes) > keptInboxBytes {
		in.bytes = nil
	}
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
	p := &Pipeline{cfg: cfg, in: &inbox{}, wake: make(chan struct{}, 1), shards: map[command.ShardID]*shardState{}, orphans: map[string]uint64{},
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
// full (or closed) the click is dropped and counted as dropped. Its strings
// are copied before Record returns (they may be views of a buffer the
// caller reuses).
func (p *Pipeline) Record(c link.Click) bool {
	if p.closed.Load() {
		p.dropped()
		return false
	}
	p.inMu.Lock()
	in := p.in
	if len(in.clicks) >= p.cfg.Capacity {
		p.inMu.Unlock()
		p.dropped()
		return false
	}
	p.queued.Add(1)
	in.clicks = append(in.clicks, inClick{time: c.Time, ip: c.IP, code: in.put(c.Code), ua: in.put(c.UA), ref: in.put(c.Referer), private: c.Private})
	first := len(in.clicks) == 1
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
const drainChunk = 1024

// drain takes the inbox and aggregates it. It reports whether there was
// anything to take.
func (p *Pipeline) drain() bool {
	p.inMu.Lock()
	in := p.in
	if len(in.clicks) == 0 {
		p.inMu.Unlock()
		return false
	}
	p.in, p.inSpare = p.inSpare, nil
	if p.in == nil {
		p.in = &inbox{}
	}
	p.inMu.Unlock()
	// Chunks of at most half the visit buffer: checked after each, the
	// buffer never fills.
	for chunk := in.clicks; len(chunk) > 0; {
		n := min(len(chunk), drainChunk, max(p.cfg.VisitBuffer/2, 1))
		p.mu.Lock()
		for i := range chunk[:n] {
			ic := &chunk[i]
			c := link.Click{Code: in.view(ic.code), Time: ic.time, IP: ic.ip, UA: in.view(ic.ua), Referer: in.view(ic.ref), Private: ic.private}
			p.add(&c)
		}
		p.queued.Add(-int64(n))
		p.mu.Unlock()
		chunk = chunk[n:]
		if p.cfg.Visits != nil && p.visitsFull() {
			p.writeVisits()
		}
		if len(chunk) > 0 {
			runtime.Gosched() // redirects waiting for a core go first
		}
	}
	in.reset()
	p.inMu.Lock()
	if p.inSpare == nil {
		p.inSpare = in
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

// flushSlots is how many parts of the flush interval the shards' batches
// are spread over: shard s is submitted in slot s mod flushSlots, so that
// the replicas apply one shard's batch at a time through the interval
// instead of every shard's at once (a burst that held both cores here and
// made the redirects' p99).
const flushSlots = 8

func (p *Pipeline) run() {
	defer close(p.done)
	t := time.NewTicker(p.cfg.FlushInterval / flushSlots)
	defer t.Stop()
	slot := 0
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
			p.flushSlot(slot)
			slot = (slot + 1) % flushSlots
			p.mu.Lock()
			due := time.Since(p.visitsAt) >= p.cfg.VisitFlushInterval
			p.mu.Unlock()
			if due {
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
	// c's strings are views of the inbox: what is kept is copied.
	ref, ok := p.refMemo[c.Referer]
	if !ok {
		ref = strings.Clone(RefererHost(c.Referer))
		if p.refMemo == nil || len(p.refMemo) >= maxMemo {
			p.refMemo = map[string]string{}
		}
		p.refMemo[strings.Clone(c.Referer)] = ref
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
		st.acc[strings.Clone(c.Code)] = g
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
func (p *Pipeline) flush(wait bool) { p.submitShards(wait, -1) }

// flushSlot submits, without waiting, the batches of the shards of slot
// (shard mod flushSlots).
func (p *Pipeline) flushSlot(slot int) { p.submitShards(false, slot) }

func (p *Pipeline) submitShards(wait bool, slot int) {
	p.mu.Lock()
	var wg sync.WaitGroup
	for shard, st := range p.shards {
		if st.inFlight || (slot >= 0 && int(shard)%flushSlots != slot) {
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
