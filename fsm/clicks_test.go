package fsm

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/axiomhq/hyperloglog"
	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/link"
)

func sketch(tb testing.TB, visitors ...string) []byte {
	tb.Helper()
	s := hyperloglog.New14()
	for _, v := range visitors {
		s.Insert([]byte(v))
	}
	b, err := s.MarshalBinary()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func uniques(tb testing.TB, b []byte) uint64 {
	tb.Helper()
	if len(b) == 0 {
		return 0
	}
	s := hyperloglog.New14()
	if err := s.UnmarshalBinary(b); err != nil {
		tb.Fatal(err)
	}
	return s.Estimate()
}

func TestClickBatchesCountOnceAndMerge(t *testing.T) {
	f := mustShard(t, ShardConfig{})
	if r := result(t, applyAt(t, f, 1, (&command.CreateIfAbsent{Code: "abc", Now: t0, Request: link.CreateRequest{URL: "https://e.example"}}).Encode())); r.Err != nil {
		t.Fatal(r.Err)
	}
	hour := uint64(t0.Unix() / 3600)
	batch := func(node string, seq uint64, humans, bots uint64, visitors ...string) []byte {
		b := &command.ClickBatch{Node: node, Seq: seq, Deltas: []command.ClickDelta{
			{Code: "abc", Delta: command.ClickTotals{
				Humans: command.Counts{Total: humans, Countries: map[string]uint64{"DE": humans}, Browsers: map[string]uint64{"Firefox": humans}, Visitors: sketch(t, visitors...)},
				Bots:   command.Counts{Total: bots, Devices: map[string]uint64{"Bot": bots}},
			}, Hours: []command.HourCount{{Hour: hour, Humans: humans, Bots: bots}}},
			{Code: "nope", Delta: command.ClickTotals{Humans: command.Counts{Total: 99}}}, // no such link: ignored
		}}
		// The wire form survives the round trip.
		back, err := command.Decode(b.Encode())
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(b, back); d != "" {
			t.Fatalf("batch round trip (-want +got):\n%s", d)
		}
		return b.Encode()
	}
	applyAt(t, f, 2, batch("n1", 10, 3, 1, "a", "b"))
	// The same batch again (a retry after an unknown outcome): ignored.
	if r := applyAt(t, f, 3, batch("n1", 10, 3, 1, "a", "b")).(*command.ClickBatchResult); !r.Duplicate {
		t.Fatal("repeated batch not recognised")
	}
	// An older one too.
	applyAt(t, f, 4, batch("n1", 9, 100, 100))
	// Another node's batch with seq 1 counts: seqs are per node.
	applyAt(t, f, 5, batch("n2", 1, 2, 0, "b", "c"))
	applyAt(t, f, 6, batch("n1", 11, 1, 0, "d"))

	st, err := f.Clicks("abc", t0.Add(-time.Hour), t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	h := st.Totals.Humans
	if h.Total != 6 || h.Countries["DE"] != 6 || h.Browsers["Firefox"] != 6 || st.Totals.Bots.Total != 1 || st.Totals.Bots.Devices["Bot"] != 1 {
		t.Fatalf("totals = %+v", st.Totals)
	}
	if u := uniques(t, h.Visitors); u != 4 {
		t.Fatalf("uniques = %d, want 4 (a, b, c, d)", u)
	}
	if len(st.Hours) != 1 || st.Hours[0] != (command.HourCount{Hour: hour, Humans: 6, Bots: 1}) {
		t.Fatalf("hours = %+v", st.Hours)
	}
	// Outside the range: no hours, same totals.
	st, _ = f.Clicks("abc", t0.Add(2*time.Hour), t0.Add(3*time.Hour))
	if len(st.Hours) != 0 || st.Totals.Humans.Total != 6 {
		t.Fatalf("out of range = %+v", st)
	}
	if st, _ := f.Clicks("nope", t0, t0.Add(time.Hour)); st.Totals.Humans.Total != 0 {
		t.Fatal("clicks counted for a code that does not exist")
	}
	// Round trip of what the stats RPC carries.
	st, _ = f.Clicks("abc", t0.Add(-time.Hour), t0.Add(time.Hour))
	var back command.ClickStats
	if err := back.Unmarshal(st.AppendTo(nil)); err != nil || back.Totals.Humans.Total != 6 || len(back.Hours) != 1 {
		t.Fatalf("stats round trip = %+v, %v", back, err)
	}
}

func TestBreakdownsAreBounded(t *testing.T) {
	f := mustShard(t, ShardConfig{})
	applyAt(t, f, 1, (&command.CreateIfAbsent{Code: "abc", Now: t0, Request: link.CreateRequest{URL: "https://e.example"}}).Encode())
	refs := map[string]uint64{}
	for i := range command.MaxBreakdownKeys + 20 {
		refs[fmt.Sprintf("r%04d.example", i)] = 1
	}
	b := &command.ClickBatch{Node: "n1", Seq: 1, Deltas: []command.ClickDelta{{Code: "abc", Delta: command.ClickTotals{Humans: command.Counts{Total: uint64(len(refs)), Referrers: refs}}}}}
	applyAt(t, f, 2, b.Encode())
	st, _ := f.Clicks("abc", t0, t0)
	r := st.Totals.Humans.Referrers
	if len(r) != command.MaxBreakdownKeys+1 || r[command.OtherKey] != 20 {
		t.Fatalf("%d referrer keys, other = %d", len(r), r[command.OtherKey])
	}
}

func TestConsumeVisitIsExactAndIdempotent(t *testing.T) {
	f := mustShard(t, ShardConfig{})
	applyAt(t, f, 1, (&command.CreateIfAbsent{Code: "once", Now: t0, Request: link.CreateRequest{URL: "https://e.example", MaxVisits: 2}}).Encode())
	applyAt(t, f, 2, (&command.CreateIfAbsent{Code: "free", Now: t0, Request: link.CreateRequest{URL: "https://e.example"}}).Encode())
	consume := func(index uint64, code string, nonce uint64) *command.LinkResult {
		return result(t, applyAt(t, f, index, (&command.ConsumeVisit{Code: code, Nonce: nonce}).Encode()))
	}
	if r := consume(3, "once", 7); r.Err != nil || r.Link.Visits != 1 {
		t.Fatalf("first visit = %+v", r)
	}
	// The same visit retried after an unknown outcome: granted, not counted.
	if r := consume(4, "once", 7); r.Err != nil || r.Link.Visits != 1 {
		t.Fatalf("retried visit = %+v", r)
	}
	if r := consume(5, "once", 8); r.Err != nil || r.Link.Visits != 2 {
		t.Fatalf("second visit = %+v", r)
	}
	if r := consume(6, "once", 9); !errors.Is(r.Err, link.ErrGone) {
		t.Fatalf("third visit err = %v, want ErrGone", r.Err)
	}
	// The second visit's retry still succeeds after the limit is reached.
	if r := consume(7, "once", 8); r.Err != nil {
		t.Fatalf("retry of a granted visit after the limit: %v", r.Err)
	}
	if l, _ := f.Get("once"); !l.OutOfVisits() || !l.Gone(t0) || l.Visits != 2 {
		t.Fatalf("stored = %+v", l)
	}
	if r := consume(8, "free", 1); r.Err != nil || r.Link.Visits != 0 {
		t.Fatalf("unlimited link = %+v", r)
	}
	if r := consume(9, "nope", 1); !errors.Is(r.Err, link.ErrNotFound) {
		t.Fatalf("unknown code err = %v", r.Err)
	}
}

// BenchmarkClickBatchApply applies a batch touching 10,000 codes with one
// click each (a node's second under a flat load over 10,000 links).
func BenchmarkClickBatchApply(b *testing.B) {
	f := mustShard(b, ShardConfig{})
	const codes = 10000
	var idx uint64
	for i := range codes {
		idx++
		f.Apply(&raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: (&command.CreateIfAbsent{Code: fmt.Sprintf("c%05d", i), Now: t0, Request: link.CreateRequest{URL: "https://e.example"}}).Encode()})
	}
	hour := uint64(t0.Unix() / 3600)
	mk := func(seq uint64) []byte {
		bt := &command.ClickBatch{Node: "n1", Seq: seq}
		for i := range codes {
			bt.Deltas = append(bt.Deltas, command.ClickDelta{Code: fmt.Sprintf("c%05d", i), Delta: command.ClickTotals{Humans: command.Counts{Total: 1,
				Countries: map[string]uint64{"DE": 1}, Devices: map[string]uint64{"Desktop": 1}, Browsers: map[string]uint64{"Firefox": 1},
				OS: map[string]uint64{"Linux": 1}, Referrers: map[string]uint64{"news.example": 1}, Visitors: sketch(b, "v")}},
				Hours: []command.HourCount{{Hour: hour, Humans: 1}}})
		}
		return bt.Encode()
	}
	data := make([][]byte, b.N)
	for i := range data {
		data[i] = mk(uint64(i + 1))
	}
	b.SetBytes(int64(len(data[0])))
	b.ResetTimer()
	for i := range b.N {
		idx++
		f.Apply(&raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data[i]})
	}
}

// BenchmarkClicksQuery reads the stats of a code with 300 million clicks:
// full breakdowns (500 referrers, 250 countries, ...), a dense visitor
// sketch of a million visitors and 30 days of hourly buckets. The
// aggregates are bounded, so the cost does not grow with the clicks.
func BenchmarkClicksQuery(b *testing.B) {
	f := mustShard(b, ShardConfig{})
	applyAt(b, f, 1, (&command.CreateIfAbsent{Code: "hot", Now: t0, Request: link.CreateRequest{URL: "https://e.example"}}).Encode())
	big := func(n int, prefix string) map[string]uint64 {
		m := map[string]uint64{}
		for i := range n {
			m[fmt.Sprintf("%s%03d", prefix, i)] = 300_000_000 / uint64(n)
		}
		return m
	}
	sk := hyperloglog.New14()
	for i := range 1_000_000 {
		sk.InsertHash(uint64(i) * 0x9E3779B97F4A7C15)
	}
	vis, _ := sk.MarshalBinary()
	start := uint64(t0.Unix() / 3600)
	var hours []command.HourCount
	for h := range 720 {
		hours = append(hours, command.HourCount{Hour: start + uint64(h), Humans: 400_000, Bots: 16_000})
	}
	batch := &command.ClickBatch{Node: "n1", Seq: 1, Deltas: []command.ClickDelta{{Code: "hot", Delta: command.ClickTotals{
		Humans: command.Counts{Total: 288_000_000, Countries: big(250, "C"), Devices: big(5, "D"), Browsers: big(40, "B"), OS: big(20, "O"), Referrers: big(500, "r"), Visitors: vis},
		Bots:   command.Counts{Total: 11_520_000, Devices: big(1, "Bot")},
	}, Hours: hours}}}
	applyAt(b, f, 2, batch.Encode())
	from, to := t0, t0.Add(30*24*time.Hour)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		st, err := f.Clicks("hot", from, to)
		if err != nil || len(st.Hours) != 720 || st.Totals.Humans.Total != 288_000_000 {
			b.Fatalf("%v %d", err, len(st.Hours))
		}
	}
}

// BenchmarkClickBatchApplyAtScale applies click batches to a shard of
// 1.25 million links (10 million over 8 shards), each batch 2,000 codes
// drawn from a skewed distribution (a shard's second of browser-like
// redirects at 10 million links: most codes clicked before, one human
// click each), the file committed after every batch as the 1-s commit
// interval does. Before the measured batches, 20 such batches (clicked=40k)
// or those and 100 batches of codes drawn evenly (clicked=230k) leave that
// many codes with clicks: the more there are, the more pages a batch
// dirties. Reported per code, with the pages a batch writes.
func BenchmarkClickBatchApplyAtScale(b *testing.B) {
	for _, c := range []struct {
		name string
		even int
	}{{"clicked=40k", 0}, {"clicked=230k", 100}} {
		b.Run(c.name, func(b *testing.B) { benchClicksAtScale(b, c.even) })
	}
}

func benchClicksAtScale(b *testing.B, even int) {
	const links, perBatch = 1250000, 2000
	f := mustShard(b, ShardConfig{Path: filepath.Join(b.TempDir(), "shard.db")})
	benchLoad(f, links, 5000, nil)
	idx := uint64(links) // benchLoad gives each link an entry
	hour := uint64(t0.Unix() / 3600)
	rng := rand.New(rand.NewPCG(1, 2))
	skewed := func() int { // about half the clicks on the first 1 %
		u := rng.Float64()
		return int(float64(links) * u * u * u * u)
	}
	draw := skewed
	mk := func(seq uint64) []byte {
		bt := &command.ClickBatch{Node: "n1", Seq: seq}
		seen := map[int]bool{}
		for len(bt.Deltas) < perBatch {
			i := draw()
			if seen[i] {
				continue
			}
			seen[i] = true
			bt.Deltas = append(bt.Deltas, command.ClickDelta{Code: fmt.Sprintf("b%06d", i), Delta: command.ClickTotals{Humans: command.Counts{Total: 1,
				Countries: map[string]uint64{"DE": 1}, Devices: map[string]uint64{"Desktop": 1}, Browsers: map[string]uint64{"Firefox": 1},
				OS: map[string]uint64{"Linux": 1}, Referrers: map[string]uint64{"news.example": 1}, Visitors: sketch(b, "v"+strconv.Itoa(i))}},
				Hours: []command.HourCount{{Hour: hour + seq/3600, Humans: 1}}})
		}
		return bt.Encode()
	}
	seq := uint64(0)
	apply := func(data []byte) {
		idx++
		if r, ok := f.Apply(&raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}).(*command.ClickBatchResult); !ok || r.Duplicate {
			b.Fatalf("apply: %#v", r)
		}
	}
	for i := range even + 20 {
		if draw = skewed; i < even {
			draw = func() int { return rng.IntN(links) }
		}
		seq++
		apply(mk(seq))
	}
	draw = skewed
	data := make([][]byte, b.N)
	for i := range data {
		data[i] = mk(seq + uint64(i) + 1)
	}
	w0 := pagesWritten(f)
	b.ResetTimer()
	for i := range b.N {
		apply(data[i])
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perBatch)/1000, "µs/code")
	b.ReportMetric(float64(pagesWritten(f)-w0)/float64(b.N), "pages/batch")
}

// pagesWritten is how many pages f's file has written since it opened.
func pagesWritten(f *ShardFSM) int64 {
	st := f.db.Stats()
	return st.TxStats.GetWrite()
}
