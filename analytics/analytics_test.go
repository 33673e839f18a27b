package analytics

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/axiomhq/hyperloglog"
	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/internal/testkit"
	"github.com/linkraft/linkraft/link"
)

const (
	chromeUA    = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"
	iphoneUA    = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1"
	googlebotUA = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
	previewUA   = "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)"
	slackUA     = "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)"
)

func TestEnrichment(t *testing.T) {
	t.Parallel()
	e := NewEnricher()
	if a := e.Agent(chromeUA); a.Bot || a.Browser != "Chrome" || a.OS != "Windows" || a.Device != "Desktop" {
		t.Fatalf("chrome = %+v", a)
	}
	if a := e.Agent(iphoneUA); a.Bot || a.Device != "Mobile" || a.OS != "iOS" {
		t.Fatalf("iphone = %+v", a)
	}
	for _, ua := range []string{googlebotUA, previewUA, slackUA, "", "curl/8.5.0", "python-requests/2.31"} {
		if a := e.Agent(ua); !a.Bot {
			t.Errorf("%q not taken for a bot: %+v", ua, a)
		}
	}
	if c := Country(netip.MustParseAddr("8.8.8.8")); c != "US" {
		t.Errorf("8.8.8.8 in %q", c)
	}
	if c := Country(netip.Addr{}); c != "unknown" {
		t.Errorf("no address in %q", c)
	}
	for in, want := range map[string]string{
		"": "direct", "https://News.Example.com/a?b": "news.example.com", "android-app://x": "unknown", "::bad": "unknown",
	} {
		if got := RefererHost(in); got != want {
			t.Errorf("RefererHost(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"203.0.113.77": "203.0.113.0", "::ffff:203.0.113.77": "203.0.113.0", "2001:db8:abcd:12:34::1": "2001:db8:abcd::",
	} {
		if got := Anonymize(netip.MustParseAddr(in)).String(); got != want {
			t.Errorf("Anonymize(%s) = %s, want %s", in, got, want)
		}
	}
}

// fsmSubmit applies batches to a real shard state machine, and can be told
// to lose the acknowledgement of the next n applied batches.
type fsmSubmit struct {
	mu       sync.Mutex
	f        *fsm.ShardFSM
	index    uint64
	loseAcks int
	calls    int
}

func (s *fsmSubmit) submit(_ context.Context, _ command.ShardID, b *command.ClickBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	s.index++
	s.f.Apply(&raft.Log{Index: s.index, Term: 1, Type: raft.LogCommand, Data: b.Encode()})
	if s.loseAcks > 0 {
		s.loseAcks--
		return errors.New("timeout: outcome unknown")
	}
	return nil
}

func newFSM(tb testing.TB, codes ...string) *fsmSubmit {
	tb.Helper()
	f, err := fsm.NewShardFSM(fsm.ShardConfig{Path: filepath.Join(tb.TempDir(), "s.db")})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	s := &fsmSubmit{f: f}
	logs := make([]*raft.Log, 0, len(codes))
	for _, c := range codes {
		s.index++
		logs = append(logs, &raft.Log{Index: s.index, Term: 1, Type: raft.LogCommand,
			Data: (&command.CreateIfAbsent{Code: c, Now: time.Now(), Request: link.CreateRequest{URL: "https://e.example/" + c}}).Encode()})
	}
	f.ApplyBatch(logs)
	return s
}

func salt(day time.Time) []byte { return []byte(day.Format("2006-01-02")) }

func TestPipelineCountsExactlyOnceDespiteLostAcks(t *testing.T) {
	t.Parallel()
	sub := newFSM(t, "abc")
	sub.loseAcks = 2 // the first two batches commit, but the node hears nothing
	p, err := New(Config{Node: "n1", Shard: func(string) command.ShardID { return 0 }, Submit: sub.submit, Salt: salt, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	now := time.Date(2026, 11, 26, 10, 30, 0, 0, time.UTC)
	for i := range 100 {
		ip := netip.AddrFrom4([4]byte{198, 51, 100, byte(i % 10)}) // 10 visitors
		p.Record(link.Click{Code: "abc", Time: now, IP: ip, UA: chromeUA, Referer: "https://news.example/x"})
	}
	for range 7 {
		p.Record(link.Click{Code: "abc", Time: now, IP: netip.MustParseAddr("192.0.2.1"), UA: previewUA})
	}
	for range 5 { // do-not-track: counted, no visitor hash
		p.Record(link.Click{Code: "abc", Time: now, IP: netip.MustParseAddr("192.0.2.99"), UA: iphoneUA, Private: true})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if left := p.Flush(ctx); left != 0 {
		t.Fatalf("%d clicks unflushed", left)
	}
	if sub.calls < 3 {
		t.Fatalf("%d submissions; the batch should have been resent after the lost acks", sub.calls)
	}
	st, err := sub.f.Clicks("abc", now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	h, b := st.Totals.Humans, st.Totals.Bots
	if h.Total != 105 || b.Total != 7 {
		t.Fatalf("humans %d bots %d, want 105 and 7 (a resent batch must count once)", h.Total, b.Total)
	}
	if h.Referrers["news.example"] != 100 || h.Referrers["direct"] != 5 || h.Devices["Mobile"] != 5 || h.Browsers["Chrome"] != 100 {
		t.Fatalf("breakdowns = %+v", h)
	}
	sk := hyperloglog.New14()
	if err := sk.UnmarshalBinary(h.Visitors); err != nil {
		t.Fatal(err)
	}
	if u := sk.Estimate(); u != 10 {
		t.Fatalf("uniques = %d, want 10 (DNT visitors are not hashed)", u)
	}
	if len(st.Hours) != 1 || st.Hours[0].Humans != 105 || st.Hours[0].Bots != 7 {
		t.Fatalf("hours = %+v", st.Hours)
	}
}

type countObs struct {
	mu                sync.Mutex
	recorded, dropped int
	flushed, failed   int
}

func (o *countObs) ClickRecorded()         { o.mu.Lock(); o.recorded++; o.mu.Unlock() }
func (o *countObs) ClickDropped()          { o.mu.Lock(); o.dropped++; o.mu.Unlock() }
func (o *countObs) ClicksFlushed(int, int) { o.mu.Lock(); o.flushed++; o.mu.Unlock() }
func (o *countObs) ClickFlushFailed(int)   { o.mu.Lock(); o.failed++; o.mu.Unlock() }
func (o *countObs) OrphanVisit()           {}

// A full pipeline drops (and counts) instead of blocking the caller.
func TestPipelineDropsWhenFull(t *testing.T) {
	t.Parallel()
	block := make(chan struct{})
	obs := &countObs{}
	p, err := New(Config{Node: "n1", Capacity: 4, FlushInterval: time.Hour, Observer: obs,
		Shard:  func(string) command.ShardID { <-block; return 0 }, // the worker is stuck on its first click
		Submit: func(context.Context, command.ShardID, *command.ClickBatch) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	accepted := 0
	if p.Record(link.Click{Code: "abc", Time: time.Now()}) {
		accepted++
	}
	// Wait until the worker holds the first click (and is stuck with it).
	inbox := func() int { p.inMu.Lock(); defer p.inMu.Unlock(); return len(p.in.clicks) }
	testkit.WaitFor(t, 5*time.Second, "the worker to take the first click", func() bool { return inbox() == 0 })
	for range 19 {
		if p.Record(link.Click{Code: "abc", Time: time.Now()}) {
			accepted++
		}
	}
	close(block)
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// One in the worker's hands, four in the queue, the rest dropped.
	if accepted != 5 || obs.dropped != 15 || obs.recorded != 5 {
		t.Fatalf("accepted %d, dropped %d, recorded %d", accepted, obs.dropped, obs.recorded)
	}
	if p.Record(link.Click{Code: "abc"}) {
		t.Fatal("a closed pipeline took a click")
	}
}

func TestVisitStoreListAndPurge(t *testing.T) {
	t.Parallel()
	s, err := OpenVisitStore(filepath.Join(t.TempDir(), "visits.db"), VisitLimits{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var vs []link.Visit
	for i := range 50 {
		vs = append(vs, link.Visit{Code: "abc", Time: t0.Add(time.Duration(i) * time.Hour), UserAgent: "ua"})
		vs = append(vs, link.Visit{Code: "ab", Time: t0.Add(time.Duration(i) * time.Hour)}) // a prefix of abc
	}
	if err := s.Add(vs); err != nil {
		t.Fatal(err)
	}
	got, err := s.List("abc", t0.Add(10*time.Hour), t0.Add(20*time.Hour), 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 10 || !got[0].Time.Equal(t0.Add(19*time.Hour)) || !got[9].Time.Equal(t0.Add(10*time.Hour)) || got[0].Code != "abc" {
		t.Fatalf("range: %d visits, first %v", len(got), got[0].Time)
	}
	if got, _ := s.List("abc", t0, t0.Add(100*time.Hour), 3); len(got) != 3 || !got[0].Time.Equal(t0.Add(49*time.Hour)) {
		t.Fatalf("limit: %+v", got)
	}
	n, err := s.Purge(t0.Add(40 * time.Hour))
	if err != nil || n != 80 {
		t.Fatalf("purged %d, %v; want 80 (40 hours of two codes)", n, err)
	}
	if got, _ := s.List("abc", t0, t0.Add(100*time.Hour), 100); len(got) != 10 {
		t.Fatalf("after purge: %d visits of abc, want 10", len(got))
	}
}

func TestPipelineKeepsAnonymisedVisitsAndOrphans(t *testing.T) {
	t.Parallel()
	sub := newFSM(t, "abc")
	store, err := OpenVisitStore(filepath.Join(t.TempDir(), "visits.db"), VisitLimits{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	p, err := New(Config{Node: "n7", Shard: func(string) command.ShardID { return 0 }, Submit: sub.submit, Visits: store, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	p.Record(link.Click{Code: "abc", Time: now, IP: netip.MustParseAddr("203.0.113.77"), UA: chromeUA, Referer: "https://news.example/a?user=42#x"})
	p.Record(link.Click{Code: "abc", Time: now, IP: netip.MustParseAddr("2001:db8:1:2:3::9"), UA: chromeUA, Private: true})
	for range 3 {
		p.RecordOrphan("typo")
	}
	p.RecordOrphan("other")
	if left := p.Flush(context.Background()); left != 0 {
		t.Fatalf("%d unflushed", left)
	}
	vs, err := p.ListVisits("abc", now.Add(-time.Minute), now.Add(time.Minute), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 1 {
		t.Fatalf("%d visit records, want 1 (the DNT visit keeps none)", len(vs))
	}
	v := vs[0]
	if v.Network != "203.0.113.0/24" || v.Referer != "https://news.example/a" || v.Node != "n7" || v.Bot {
		t.Fatalf("visit = %+v", v)
	}
	o := p.Orphans(1)
	if o.Total != 4 || len(o.Top) != 1 || o.Top[0] != (link.CodeCount{Code: "typo", Count: 3}) {
		t.Fatalf("orphans = %+v", o)
	}
	p.RecordOrphan("late") // counted after the last flush: Close writes it
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The counts outlive the pipeline (a restart): a new one on the same
	// file goes on from them.
	p2, err := New(Config{Node: "n7", Shard: func(string) command.ShardID { return 0 }, Submit: sub.submit, Visits: store, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close(context.Background())
	p2.RecordOrphan("typo")
	want := link.OrphanSummary{Total: 6, Top: []link.CodeCount{{Code: "typo", Count: 4}, {Code: "late", Count: 1}, {Code: "other", Count: 1}}}
	if d := cmp.Diff(want, p2.Orphans(10)); d != "" {
		t.Fatalf("orphans after a restart (-want +got):\n%s", d)
	}
	if left := p2.Flush(context.Background()); left != 0 {
		t.Fatalf("%d unflushed", left)
	}
	counts, total, err := store.Orphans()
	if err != nil || total != 6 || counts["typo"] != 4 || len(counts) != 3 {
		t.Fatalf("stored orphans %v (total %d), %v", counts, total, err)
	}
}

// Clicks arriving faster than the visit flush interval drains them: the
// buffer is written early, not left to overflow and drop visits.
func TestPipelineWritesVisitsEarlyRatherThanDrop(t *testing.T) {
	t.Parallel()
	sub := newFSM(t, "abc")
	store, err := OpenVisitStore(filepath.Join(t.TempDir(), "visits.db"), VisitLimits{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	const buffer, clicks = 100, 1000
	p, err := New(Config{Node: "n1", Shard: func(string) command.ShardID { return 0 }, Submit: sub.submit, Visits: store,
		FlushInterval: time.Hour, VisitFlushInterval: time.Hour, VisitBuffer: buffer})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for i := range clicks {
		if !p.Record(link.Click{Code: "abc", Time: now, IP: netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}), UA: chromeUA}) {
			t.Fatal("click dropped")
		}
	}
	if left := p.Flush(context.Background()); left != 0 {
		t.Fatalf("%d unflushed", left)
	}
	vs, err := p.ListVisits("abc", now.Add(-time.Minute), now.Add(time.Minute), 2*clicks)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != clicks {
		t.Fatalf("%d visit records for %d clicks through a buffer of %d", len(vs), clicks, buffer)
	}
	_ = p.Close(context.Background())
}

// TestRecordKeepsNoViewOfTheCallersBuffer: Record copies a click's strings
// (the fast path hands it views of a connection buffer it reuses), and
// nothing the pipeline keeps — the aggregate's codes, breakdown keys, memos,
// raw visits — points into its own inbox once that is reused: a batch made
// after the caller's bytes and the inbox were overwritten still names the
// right code, browser and referrer.
func TestRecordKeepsNoViewOfTheCallersBuffer(t *testing.T) {
	t.Parallel()
	var got *command.ClickBatch
	p, err := New(Config{Node: "n1", FlushInterval: time.Hour, Shard: func(string) command.ShardID { return 0 },
		Submit: func(_ context.Context, _ command.ShardID, b *command.ClickBatch) error { got = b; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	buf := []byte("abc " + chromeUA + " https://news.example/item")
	view := func(from, to int) string { return unsafe.String(&buf[from], to-from) }
	p.Record(link.Click{Code: view(0, 3), Time: time.Now(), UA: view(4, 4+len(chromeUA)), Referer: view(5+len(chromeUA), len(buf))})
	for i := range buf { // the caller reuses its buffer
		buf[i] = 'x'
	}
	p.drain()
	for range 3 { // and the inbox is reused, twice over
		p.Record(link.Click{Code: "zzz", Time: time.Now(), UA: strings.Repeat("y", len(chromeUA)), Referer: "https://other.example/"})
		p.drain()
	}
	p.flush(true)
	if got == nil || len(got.Deltas) != 2 {
		t.Fatalf("batch %+v, want deltas of abc and zzz", got)
	}
	d := got.Deltas[0]
	if d.Code != "abc" || d.Delta.Humans.Total != 1 || d.Delta.Humans.Browsers["Chrome"] != 1 || d.Delta.Humans.Referrers["news.example"] != 1 {
		t.Fatalf("abc's delta %+v: a kept string changed under the pipeline", d)
	}
}

// TestFloodedInboxLetsGoOfItsArena: clicks with the longest User-Agent and
// Referer a handler passes on, up to the pipeline's capacity, grow an
// inbox's byte arena past keptInboxBytes; once emptied it keeps none of
// it, so a stranger's flood does not leave the node holding tens of MiB.
func TestFloodedInboxLetsGoOfItsArena(t *testing.T) {
	t.Parallel()
	p, err := New(Config{Node: "n1", FlushInterval: time.Hour, Capacity: 8192, Shard: func(string) command.ShardID { return 0 },
		Submit: func(context.Context, command.ShardID, *command.ClickBatch) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	ua, ref := strings.Repeat("u", 512), "https://x.example/"+strings.Repeat("r", 1000)
	p.inMu.Lock() // the worker waits: the whole flood lands in one inbox
	in := p.in
	p.inMu.Unlock()
	for range 8192 {
		in.clicks = append(in.clicks, inClick{code: in.put("abc"), ua: in.put(ua), ref: in.put(ref)})
	}
	if cap(in.bytes) <= keptInboxBytes {
		t.Fatalf("a flood of 8,192 long clicks grew the arena to only %d bytes", cap(in.bytes))
	}
	in.reset()
	if cap(in.bytes) > keptInboxBytes || len(in.clicks) != 0 {
		t.Fatalf("an emptied inbox keeps %d bytes of arena and %d clicks", cap(in.bytes), len(in.clicks))
	}
}
