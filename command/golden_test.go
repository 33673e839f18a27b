package command

import (
	"bufio"
	"encoding/hex"
	goflag "flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/link"
)

var updateGolden = goflag.Bool("update-golden", false, "rewrite testdata/encodings.golden from the current encoders")

// goldenSamples are one value of every encoded form, every field set: the
// Raft commands, the records kept in bbolt and the messages between
// nodes.
func goldenSamples() []struct {
	name string
	b    []byte
} {
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
	return []struct {
		name string
		b    []byte
	}{
		{"CreateIfAbsent", create.Encode()},
		{"Update", (&Update{Code: "abc", Now: t0, Patch: link.Patch{URL: new("https://example.com/u"), ExpiresAt: new(t1), Redirect: new(307), Disabled: new(true), Tags: new([]string{"a", "b"})}}).Encode()},
		{"Delete", (&Delete{Code: "abc", Now: t0}).Encode()},
		{"ConsumeVisit", (&ConsumeVisit{Code: "abc", Nonce: 99}).Encode()},
		{"CreateBatch", (&CreateBatch{Creates: []CreateIfAbsent{create, {Code: "b2", Now: t0, Nonce: 1, Request: link.CreateRequest{URL: "https://b.example"}}}}).Encode()},
		{"SetSettings", (&SetSettings{Settings: Settings{ClusterID: "c1", Shards: 8, PartitionCount: 271, ReplicationFactor: 3, Load: 1.25,
			CodeMode: "permuted", CodeKey: []byte("0123456789abcdef"), CreatedAt: t0, RingVNodes: 0, RingHasher: "xxhash64"}}).Encode()},
		{"LeaseRange", (&LeaseRange{Node: "n1", N: 1024}).Encode()},
		{"SetPlacement", (&SetPlacement{Placement: Placement{Version: 3, Shards: [][]string{{"n1", "n2"}, {"n2", "n3"}, {}}, Removed: []string{"n9"}}}).Encode()},
		{"RegisterNode", (&RegisterNode{Node: "n1", Incarnation: "inc-1", At: t0}).Encode()},
		{"CreateKey", (&CreateKey{Key: key, First: true}).Encode()},
		{"RevokeKey", (&RevokeKey{ID: "00112233aabbccdd", At: t0}).Encode()},
		{"SetBlocked", (&SetBlocked{Domain: "evil.example", Blocked: true, At: t0}).Encode()},
		{"ClickBatch", (&ClickBatch{Node: "n1", Seq: 77, Deltas: []ClickDelta{
			{Code: "abc", Delta: ClickTotals{Humans: counts, Bots: Counts{Total: 1}}, Hours: []HourCount{{Hour: 493000, Humans: 4, Bots: 1}, {Hour: 493001, Humans: 1}}},
			{Code: "def", Delta: ClickTotals{Humans: Counts{Total: 2}}},
		}}).Encode()},
		// Fields added since: samples of their own, so the older pins stay.
		{"CreateIfAbsent(drop-query)", (&CreateIfAbsent{Code: "dq", Now: t0, Nonce: 5, Request: link.CreateRequest{URL: "https://example.com/q", DropQuery: true}}).Encode()},
		{"Update(drop-query)", (&Update{Code: "dq", Now: t0, Patch: link.Patch{DropQuery: new(true)}}).Encode()},
		{"Link(stored, drop-query)", EncodeRecord(&link.Link{Code: "dq", URL: "https://example.com/q", CreatedAt: t0, UpdatedAt: t0,
			Redirect: link.DefaultRedirect, DropQuery: true})},
		{"CreateIfAbsent(title)", (&CreateIfAbsent{Code: "tt", Now: t0, Nonce: 6, Request: link.CreateRequest{URL: "https://example.com/t", Title: "Notes", Description: "Two\nlines"}}).Encode()},
		{"Update(title)", (&Update{Code: "tt", Now: t0, Patch: link.Patch{Title: new("New"), Description: new("")}}).Encode()},
		{"Link(stored, title)", EncodeRecord(&link.Link{Code: "tt", URL: "https://example.com/t", CreatedAt: t0, UpdatedAt: t0,
			Redirect: link.DefaultRedirect, Title: "Notes", Description: "Two\nlines"})},
		{"AdmitNode", (&AdmitNode{Member: RegisterNode{Node: "n1", Incarnation: "inc-1", At: t0, Level: 5}}).Encode()},
		{"Link(wire)", EncodeLink(lk)},
		{"Link(stored)", EncodeRecord(lk)},
		{"Link(stored, defaults)", EncodeRecord(plain)},
		{"ClickTotals", (&ClickTotals{Humans: counts, Bots: counts}).AppendTo(nil)},
		{"ClickStats", (&ClickStats{Totals: ClickTotals{Humans: counts}, Hours: []HourCount{{Hour: 493000, Humans: 4, Bots: 1}}}).AppendTo(nil)},
	}
}

// TestEncodingsAreUnchanged pins the bytes of every command and stored
// record: the Raft log and the bbolt files outlive any version of the
// code, so an encoder may change only with a new field or type. Each pinned
// encoding must also decode and encode back to itself.
func TestEncodingsAreUnchanged(t *testing.T) {
	t.Parallel()
	path := "testdata/encodings.golden"
	samples := goldenSamples()
	if *updateGolden {
		var sb strings.Builder
		for _, s := range samples {
			fmt.Fprintf(&sb, "%s %s\n", s.name, hex.EncodeToString(s.b))
		}
		if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, h, _ := strings.Cut(sc.Text(), " ")
		if i := strings.LastIndexByte(sc.Text(), ' '); i > 0 {
			name, h = sc.Text()[:i], sc.Text()[i+1:]
		}
		want[name] = h
	}
	if len(want) != len(samples) {
		t.Fatalf("%d pinned encodings, %d samples", len(want), len(samples))
	}
	for _, s := range samples {
		if got := hex.EncodeToString(s.b); got != want[s.name] {
			t.Errorf("%s encodes as\n%s\npinned\n%s", s.name, got, want[s.name])
			continue
		}
		b, _ := hex.DecodeString(want[s.name])
		var back []byte
		switch s.name {
		case "Link(wire)":
			l, err := DecodeLink(b)
			if err != nil {
				t.Fatal(err)
			}
			back = EncodeLink(l)
		case "Link(stored)", "Link(stored, defaults)", "Link(stored, drop-query)", "Link(stored, title)":
			code := map[string]string{"Link(stored)": "abc", "Link(stored, defaults)": "plain", "Link(stored, drop-query)": "dq", "Link(stored, title)": "tt"}[s.name]
			l, err := DecodeRecord([]byte(code), b)
			if err != nil {
				t.Fatal(err)
			}
			back = EncodeRecord(l)
		case "ClickTotals":
			var tot ClickTotals
			if err := tot.Unmarshal(b); err != nil {
				t.Fatal(err)
			}
			back = tot.AppendTo(nil)
		case "ClickStats":
			var st ClickStats
			if err := st.Unmarshal(b); err != nil {
				t.Fatal(err)
			}
			back = st.AppendTo(nil)
		default:
			cmd, err := Decode(b)
			if err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			back = cmd.(interface{ Encode() []byte }).Encode()
		}
		if !bytesEqual(back, b) {
			t.Errorf("%s: decoded and encoded again\n%x\npinned\n%x", s.name, back, b)
		}
	}
}

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }
