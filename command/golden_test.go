package command

import (
	"bytes"
	goflag "flag"
	"strings"
	"testing"
	"time"

	"github.com/linkraft/linkraft/internal/golden"

	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/link"
)

var updateGolden = goflag.Bool("update-golden", false, "rewrite testdata/encodings.golden from the current encoders")

// goldenSamples are one value of every encoded form, every field set: the
// Raft commands, the records kept in bbolt and the messages between
// nodes.
func goldenSamples() []golden.Sample {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 123456789, time.UTC)
	t1 := t0.Add(90 * time.Minute)
	create := CreateIfAbsent{Code: "abc", Now: t0, Nonce: 0xdeadbeefcafe, Request: link.CreateRequest{URL: "https://example.com/x?y=1", Owner: "team-a", ExpiresAt: t1, Redirect: 301, MaxVisits: 7, Tags: []string{"one", "", "three"}}}
	lk := &link.Link{Code: "abc", URL: "https://example.com/x", Owner: "team-a", CreatedAt: t0, UpdatedAt: t1, ExpiresAt: t1.Add(time.Hour),
		Redirect: 308, Disabled: true, Deleted: true, MaxVisits: 9, Visits: 3, Tags: []string{"t"}, Nonce: 42, Version: 1234}
	plain := &link.Link{Code: "plain", URL: "https://example.com/p", CreatedAt: t0, UpdatedAt: t0, Redirect: link.DefaultRedirect}
	key := apikey.Key{ID: "00112233aabbccdd", Name: "ci", Owner: "team-a", Scopes: apikey.LinksRead | apikey.StatsRead,
		RateLimit: 25, CreatedAt: t0, Hash: apikey.HashOf("lrk_secret")}
	counts := Counts{Total: 5, Countries: map[string]uint64{"DE": 3, "FR": 2}, Devices: map[string]uint64{"mobile": 5},
		Browsers: map[string]uint64{"Firefox": 5}, OS: map[string]uint64{"Linux": 5}, Referrers: map[string]uint64{"news.example": 1},
		Visitors: []byte{1, 2, 3}}
	return []golden.Sample{
		{Name: "CreateIfAbsent", Bytes: create.Encode()},
		{Name: "Update", Bytes: (&Update{Code: "abc", Now: t0, Patch: link.Patch{URL: new("https://example.com/u"), ExpiresAt: new(t1), Redirect: new(307), Disabled: new(true), Tags: new([]string{"a", "b"})}}).Encode()},
		{Name: "Delete", Bytes: (&Delete{Code: "abc", Now: t0}).Encode()},
		{Name: "ConsumeVisit", Bytes: (&ConsumeVisit{Code: "abc", Nonce: 99}).Encode()},
		{Name: "CreateBatch", Bytes: (&CreateBatch{Creates: []CreateIfAbsent{create, {Code: "b2", Now: t0, Nonce: 1, Request: link.CreateRequest{URL: "https://b.example"}}}}).Encode()},
		{Name: "SetSettings", Bytes: (&SetSettings{Settings: Settings{ClusterID: "c1", Shards: 8, PartitionCount: 271, ReplicationFactor: 3, Load: 1.25,
			CodeMode: "permuted", CodeKey: []byte("0123456789abcdef"), CreatedAt: t0, RingVNodes: 0, RingHasher: "xxhash64"}}).Encode()},
		{Name: "LeaseRange", Bytes: (&LeaseRange{Node: "n1", N: 1024}).Encode()},
		{Name: "SetPlacement", Bytes: (&SetPlacement{Placement: Placement{Version: 3, Shards: [][]string{{"n1", "n2"}, {"n2", "n3"}, {}}, Removed: []string{"n9"}}}).Encode()},
		{Name: "SetPlacement moving", Bytes: (&SetPlacement{Placement: Placement{Version: 4, Shards: [][]string{{"n1", "n2", "n4"}, {"n2", "n3"}}, Moves: []Move{{Shard: 0, From: "n1", To: "n4"}}, Draining: []string{"n1"}}}).Encode()},
		{Name: "RegisterNode", Bytes: (&RegisterNode{Node: "n1", Incarnation: "inc-1", At: t0}).Encode()},
		{Name: "CreateKey", Bytes: (&CreateKey{Key: key, First: true}).Encode()},
		{Name: "RevokeKey", Bytes: (&RevokeKey{ID: "00112233aabbccdd", At: t0}).Encode()},
		{Name: "SetBlocked", Bytes: (&SetBlocked{Domain: "evil.example", Blocked: true, At: t0}).Encode()},
		{Name: "ClickBatch", Bytes: (&ClickBatch{Node: "n1", Seq: 77, Deltas: []ClickDelta{
			{Code: "abc", Delta: ClickTotals{Humans: counts, Bots: Counts{Total: 1}}, Hours: []HourCount{{Hour: 493000, Humans: 4, Bots: 1}, {Hour: 493001, Humans: 1}}},
			{Code: "def", Delta: ClickTotals{Humans: Counts{Total: 2}}},
		}}).Encode()},
		// Fields added since: samples of their own, so the older pins stay.
		{Name: "CreateIfAbsent(drop-query)", Bytes: (&CreateIfAbsent{Code: "dq", Now: t0, Nonce: 5, Request: link.CreateRequest{URL: "https://example.com/q", DropQuery: true}}).Encode()},
		{Name: "Update(drop-query)", Bytes: (&Update{Code: "dq", Now: t0, Patch: link.Patch{DropQuery: new(true)}}).Encode()},
		{Name: "Link(stored, drop-query)", Bytes: EncodeRecord(&link.Link{Code: "dq", URL: "https://example.com/q", CreatedAt: t0, UpdatedAt: t0,
			Redirect: link.DefaultRedirect, DropQuery: true})},
		{Name: "CreateIfAbsent(title)", Bytes: (&CreateIfAbsent{Code: "tt", Now: t0, Nonce: 6, Request: link.CreateRequest{URL: "https://example.com/t", Title: "Notes", Description: "Two\nlines"}}).Encode()},
		{Name: "Update(title)", Bytes: (&Update{Code: "tt", Now: t0, Patch: link.Patch{Title: new("New"), Description: new("")}}).Encode()},
		{Name: "Link(stored, title)", Bytes: EncodeRecord(&link.Link{Code: "tt", URL: "https://example.com/t", CreatedAt: t0, UpdatedAt: t0,
			Redirect: link.DefaultRedirect, Title: "Notes", Description: "Two\nlines"})},
		{Name: "CreateIfAbsent(note)", Bytes: (&CreateIfAbsent{Code: "nt", Now: t0, Nonce: 7, Request: link.CreateRequest{URL: "https://example.com/n", Note: "for the\nlaunch"}}).Encode()},
		{Name: "Update(note)", Bytes: (&Update{Code: "nt", Now: t0, Patch: link.Patch{Note: new("")}}).Encode()},
		{Name: "Link(stored, note)", Bytes: EncodeRecord(&link.Link{Code: "nt", URL: "https://example.com/n", CreatedAt: t0, UpdatedAt: t0,
			Redirect: link.DefaultRedirect, Note: "for the\nlaunch"})},
		{Name: "RestoreLinks", Bytes: (&RestoreLinks{Links: []RestoredLink{
			{Code: "abc", Record: EncodeRecord(&link.Link{URL: "https://example.com/r", CreatedAt: t0, UpdatedAt: t0, Redirect: link.DefaultRedirect}),
				Clicks: ClickStats{Totals: ClickTotals{Humans: Counts{Total: 3}}, Hours: []HourCount{{Hour: 493000, Humans: 3}}}},
			{Code: "gone", Record: EncodeRecord(&link.Link{CreatedAt: t0, UpdatedAt: t0, Deleted: true, Redirect: link.DefaultRedirect})},
		}}).Encode()},
		{Name: "AdmitNode", Bytes: (&AdmitNode{Member: RegisterNode{Node: "n1", Incarnation: "inc-1", At: t0, Level: 5}}).Encode()},
		{Name: "Link(wire)", Bytes: EncodeLink(lk)},
		{Name: "Link(stored)", Bytes: EncodeRecord(lk)},
		{Name: "Link(stored, defaults)", Bytes: EncodeRecord(plain)},
		{Name: "ClickTotals", Bytes: (&ClickTotals{Humans: counts, Bots: counts}).AppendTo(nil)},
		{Name: "ClickStats", Bytes: (&ClickStats{Totals: ClickTotals{Humans: counts}, Hours: []HourCount{{Hour: 493000, Humans: 4, Bots: 1}}}).AppendTo(nil)},
	}
}

// TestEncodingsAreUnchanged pins the bytes of every command and stored
// record: the Raft log and the bbolt files outlive any version of the
// code, so an encoder may change only with a new field or type. Each pinned
// encoding must also decode and encode back to itself.
func TestEncodingsAreUnchanged(t *testing.T) {
	t.Parallel()
	pinned := golden.Check(t, "testdata/encodings.golden", goldenSamples(), *updateGolden)
	for _, s := range goldenSamples() {
		b := pinned[s.Name]
		var back []byte
		switch {
		case s.Name == "Link(wire)":
			l, err := DecodeLink(b)
			if err != nil {
				t.Fatal(err)
			}
			back = EncodeLink(l)
		case strings.HasPrefix(s.Name, "Link(stored"):
			// The stored form leaves the code out (it is the record's
			// key), so any code makes the same bytes again.
			l, err := DecodeRecord([]byte("any"), b)
			if err != nil {
				t.Fatal(err)
			}
			back = EncodeRecord(l)
		case s.Name == "ClickTotals":
			var tot ClickTotals
			if err := tot.Unmarshal(b); err != nil {
				t.Fatal(err)
			}
			back = tot.AppendTo(nil)
		case s.Name == "ClickStats":
			var st ClickStats
			if err := st.Unmarshal(b); err != nil {
				t.Fatal(err)
			}
			back = st.AppendTo(nil)
		default:
			cmd, err := Decode(b)
			if err != nil {
				t.Fatalf("%s: %v", s.Name, err)
			}
			back = cmd.(interface{ Encode() []byte }).Encode()
		}
		if !bytes.Equal(back, b) {
			t.Errorf("%s: decoded and encoded again\n%x\npinned\n%x", s.Name, back, b)
		}
	}
}
