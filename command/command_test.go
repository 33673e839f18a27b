package command

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/internal/wire"
	"github.com/linkraft/linkraft/link"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func FuzzDecode(f *testing.F) {
	f.Add((&CreateIfAbsent{Code: "abc", URL: "https://e.example", Now: t0, Tags: []string{"t"}, Nonce: 1}).Encode())
	f.Add((&Update{Code: "abc", Now: t0, Set: SetURL | SetTags, URL: "https://x.example"}).Encode())
	f.Add((&Delete{Code: "abc", Now: t0}).Encode())
	f.Add((&LeaseRange{Node: "n1", N: 5}).Encode())
	f.Add((&SetSettings{Settings: Settings{Shards: 8, Load: 1.25, CodeKey: []byte{1, 2}}}).Encode())
	f.Add((&SetPlacement{Placement: Placement{Version: 1, Shards: [][]string{{"n1", "n2"}, {"n3"}}}}).Encode())
	f.Add((&ConsumeVisit{Code: "abc", Nonce: 9}).Encode())
	f.Add((&CreateBatch{Creates: []CreateIfAbsent{{Code: "a", URL: "https://a.example", Now: t0, Nonce: 1},
		{Code: "b", URL: "https://b.example", Now: t0, Tags: []string{"t"}}}}).Encode())
	f.Add((&ClickBatch{Node: "n1", Seq: 3, Deltas: []ClickDelta{{Code: "abc", Delta: ClickTotals{
		Humans: Counts{Total: 2, Countries: map[string]uint64{"DE": 2}, Visitors: []byte{1, 2}}, Bots: Counts{Total: 1}},
		Hours: []HourCount{{Hour: 7, Humans: 2, Bots: 1}}}}}).Encode())
	f.Add((&RegisterNode{Node: "n1", Incarnation: "i1", At: t0}).Encode())
	f.Add((&AdmitNode{Member: RegisterNode{Node: "n1", Incarnation: "i1", At: t0, Level: 5}}).Encode())
	f.Add((&CreateKey{Key: apikey.Key{ID: "0011223344556677", Owner: "admin", Scopes: apikey.Admin, Hash: apikey.HashOf("x")}, First: true}).Encode())
	f.Add((&RevokeKey{ID: "0011223344556677", At: t0}).Encode())
	f.Add((&SetBlocked{Domain: "evil.example", Blocked: true, At: t0}).Encode())
	f.Fuzz(func(t *testing.T, data []byte) {
		cmd, err := Decode(data)
		if err != nil {
			if !errors.Is(err, wire.ErrDecode) {
				t.Fatalf("error %v does not wrap wire.ErrDecode", err)
			}
			return
		}
		// Whatever decodes re-encodes to something that decodes equal.
		c, ok := cmd.(interface{ Encode() []byte })
		if !ok {
			t.Fatalf("Decode returned %T", cmd)
		}
		again := c.Encode()
		cmd2, err := Decode(again)
		if err != nil {
			t.Fatalf("re-encoded command does not decode: %v", err)
		}
		if d := cmp.Diff(cmd, cmd2); d != "" {
			t.Fatalf("round trip changed the command:\n%s", d)
		}
	})
}

// TestLinkRecordFormRoundTrips: the record form leaves out what the key
// and the defaults say and gets it all back; values in the wire form
// decode the same.
func TestLinkRecordFormRoundTrips(t *testing.T) {
	t.Parallel()
	plain := &link.Link{Code: "abc123", URL: "https://www.example.com/articles/2026/11/some-article-00000001",
		CreatedAt: t0, UpdatedAt: t0, Redirect: link.DefaultRedirect, Nonce: 0xfeedfacecafebeef, Version: 77}
	edited := plain.Clone()
	edited.UpdatedAt, edited.Redirect, edited.Tags, edited.ExpiresAt = t0.Add(time.Hour), 301, []string{"t"}, t0.Add(48*time.Hour)
	for _, l := range []*link.Link{plain, edited} {
		for name, v := range map[string][]byte{"record": EncodeRecord(l), "wire": EncodeLink(l)} {
			got, err := DecodeRecord([]byte(l.Code), v)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(l, got); d != "" {
				t.Fatalf("%s form of %s changed:\n%s", name, l.Code, d)
			}
		}
	}
	if s, f := len(EncodeRecord(plain)), len(EncodeLink(plain)); f-s < 20 {
		t.Fatalf("record form %d bytes, wire form %d: the code, UpdatedAt and redirect should be left out", s, f)
	}
}
