package command

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/internal/wire"
	"github.com/linkraft/linkraft/link"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func FuzzDecode(f *testing.F) {
	f.Add((&CreateIfAbsent{Code: "abc", Now: t0, Nonce: 1, Request: link.CreateRequest{URL: "https://e.example", Tags: []string{"t"}}}).Encode())
	f.Add((&Update{Code: "abc", Now: t0, Patch: link.Patch{URL: new("https://x.example"), Tags: new([]string(nil))}}).Encode())
	f.Add((&Delete{Code: "abc", Now: t0}).Encode())
	f.Add((&LeaseRange{Node: "n1", N: 5}).Encode())
	f.Add((&SetSettings{Settings: Settings{Shards: 8, Load: 1.25, CodeKey: []byte{1, 2}}}).Encode())
	f.Add((&SetPlacement{Placement: Placement{Version: 1, Shards: [][]string{{"n1", "n2"}, {"n3"}}}}).Encode())
	f.Add((&ConsumeVisit{Code: "abc", Nonce: 9}).Encode())
	f.Add((&CreateBatch{Creates: []CreateIfAbsent{{Code: "a", Now: t0, Nonce: 1, Request: link.CreateRequest{URL: "https://a.example"}},
		{Code: "b", Now: t0, Request: link.CreateRequest{URL: "https://b.example", Tags: []string{"t"}}}}}).Encode())
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
		if d := cmp.Diff(cmd, cmd2, cmpopts.IgnoreUnexported(Update{})); d != "" {
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

// TestUpdateChecksAsBeforeAndAppliesTheMask: an update's patch is what its
// mask says, whatever values the entry holds; and every value is checked
// as the versions before Patch checked it (the URL and the redirect with
// their bit, the rest whatever their bit says), so every replica of any
// version rejects the same entries.
func TestUpdateChecksAsBeforeAndAppliesTheMask(t *testing.T) {
	t.Parallel()
	// An entry as a version before Patch could write it: the title's bit
	// without its value (it removes the title), a URL without its bit.
	raw := func(mask UpdateMask, fields ...[]byte) []byte {
		b := wire.AppendString([]byte{byte(TypeUpdate)}, fCode, "abc")
		b = wire.AppendUint(b, fMask, uint64(mask))
		for _, f := range fields {
			b = append(b, f...)
		}
		return b
	}
	entry := raw(SetTitle, wire.AppendString(nil, fURL, "https://ignored.example"))
	if err := Check(GroupShard, entry); err != nil {
		t.Fatal(err)
	}
	spec, _ := Lookup(TypeUpdate)
	v, err := spec.Parse(entry[1:])
	if err != nil {
		t.Fatal(err)
	}
	p := v.(*Update).Patch
	if p.Title == nil || *p.Title != "" || p.URL != nil {
		t.Fatalf("patch %+v: want the title removed and the URL left alone", p)
	}
	l := &link.Link{URL: "https://kept.example", Title: "old"}
	p.ApplyTo(l)
	if l.URL != "https://kept.example" || l.Title != "" {
		t.Fatalf("applied: %+v", l)
	}
	for name, e := range map[string][]byte{
		"a title over 16 KiB without its bit": raw(SetURL, wire.AppendString(nil, fURL, "https://a.example"), wire.AppendString(nil, fTitle, strings.Repeat("t", 17<<10))),
		"tags over the bound without the bit": raw(0, bytes.Repeat(wire.AppendString(nil, fTag, "t"), 300)),
		"the URL's bit with no URL":           raw(SetURL),
	} {
		if err := Check(GroupShard, e); !errors.Is(err, ErrRejected) {
			t.Errorf("%s: %v, want a rejection", name, err)
		}
	}
	// A bad URL without its bit was never looked at.
	if err := Check(GroupShard, raw(0, wire.AppendString(nil, fURL, "javascript:x"))); err != nil {
		t.Errorf("a URL without its bit: %v", err)
	}
}

// TestFieldLevels: a create or an update needs the feature level of the
// newest field it sets, as the field table says.
func TestFieldLevels(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		req  link.CreateRequest
		want int
	}{
		{link.CreateRequest{URL: "https://e.example", Tags: []string{"t"}, MaxVisits: 3}, 0},
		{link.CreateRequest{URL: "https://e.example", Title: "t"}, LevelLinkMeta},
		{link.CreateRequest{URL: "https://e.example", DropQuery: true}, LevelLinkMeta},
		{link.CreateRequest{URL: "https://e.example", Title: "t", Note: "n"}, LevelLinkNote},
		{link.CreateRequest{URL: "https://e.example", Title: "t", Rules: []link.Rule{{Device: link.DeviceIOS, URL: "https://a.example"}}}, LevelLinkAccess},
	} {
		if got := (&CreateIfAbsent{Code: "a", Request: c.req}).Level(); got != c.want {
			t.Errorf("create %+v: level %d, want %d", c.req, got, c.want)
		}
	}
	for _, c := range []struct {
		p    link.Patch
		want int
	}{
		{link.Patch{URL: new("https://e.example"), Disabled: new(true)}, 0},
		{link.Patch{Description: new("")}, LevelLinkMeta},
		{link.Patch{PasswordHash: new("")}, LevelLinkAccess},
		{link.Patch{Note: new(""), PasswordHash: new("")}, LevelLinkNote},
	} {
		if got := (&Update{Code: "a", Patch: c.p}).Level(); got != c.want {
			t.Errorf("patch %+v: level %d, want %d", c.p, got, c.want)
		}
	}
}
