package fsm

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/link"
)

// TestDumpAndRestoreLinks: what Dump reads of a shard (live links,
// tombstones, clicks), put into an empty shard by RestoreLinks, reads back
// the same, indexes included; the restored tombstone keeps its code gone;
// the same restore again changes nothing, and a code held by another link
// is left alone and named.
func TestDumpAndRestoreLinks(t *testing.T) {
	t.Parallel()
	src := mustShard(t, ShardConfig{})
	idx := uint64(0)
	apply := func(f *ShardFSM, b []byte) any { idx++; return applyAt(t, f, idx, b) }
	for i := range 30 {
		c := &command.CreateIfAbsent{Code: fmt.Sprintf("c%02d", i), Now: t0.Add(time.Duration(i) * time.Minute), Nonce: uint64(i + 1),
			Request: link.CreateRequest{URL: fmt.Sprintf("https://e.example/%d", i), Owner: "o1", Tags: []string{"t"}, Note: "n", Redirect: 302}}
		if r := result(t, apply(src, c.Encode())); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if r := result(t, apply(src, (&command.Delete{Code: "c03", Now: t0.Add(time.Hour)}).Encode())); r.Err != nil {
		t.Fatal(r.Err)
	}
	hour := uint64(t0.Unix() / 3600)
	apply(src, (&command.ClickBatch{Node: "n1", Seq: 1, Deltas: []command.ClickDelta{{Code: "c07",
		Delta: command.ClickTotals{Humans: command.Counts{Total: 5, Countries: map[string]uint64{"DE": 5}}, Bots: command.Counts{Total: 2}},
		Hours: []command.HourCount{{Hour: hour, Humans: 5, Bots: 2}}}}}).Encode())

	// Dump in small pieces: every record once, in code order.
	var dumped []command.RestoredLink
	for after, more := "", true; more; {
		part, m, err := src.Dump(after, 300)
		if err != nil {
			t.Fatal(err)
		}
		if len(part) == 0 {
			t.Fatal("an empty part that says more follows")
		}
		dumped, after, more = append(dumped, part...), part[len(part)-1].Code, m
	}
	if len(dumped) != 30 || dumped[0].Code != "c00" || dumped[29].Code != "c29" {
		t.Fatalf("dumped %d records", len(dumped))
	}

	dst := mustShard(t, ShardConfig{})
	taken := &command.CreateIfAbsent{Code: "c10", Now: t0, Request: link.CreateRequest{URL: "https://other.example"}}
	idx = 100
	if r := result(t, apply(dst, taken.Encode())); r.Err != nil {
		t.Fatal(r.Err)
	}
	restore := func() *command.RestoreResult {
		t.Helper()
		var total command.RestoreResult
		for i := 0; i < len(dumped); i += 7 {
			entry := &command.RestoreLinks{Links: dumped[i:min(i+7, len(dumped))]}
			back, err := command.Decode(entry.Encode())
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(entry, back); d != "" {
				t.Fatalf("wire round trip (-sent +decoded):\n%s", d)
			}
			r, ok := apply(dst, entry.Encode()).(*command.RestoreResult)
			if !ok {
				t.Fatalf("restore answered %T", r)
			}
			total.Restored, total.Present = total.Restored+r.Restored, total.Present+r.Present
			total.Conflicts = append(total.Conflicts, r.Conflicts...)
		}
		return &total
	}
	if r := restore(); r.Restored != 29 || r.Present != 0 || len(r.Conflicts) != 1 || r.Conflicts[0] != "c10" {
		t.Fatalf("first restore: %+v", r)
	}
	for _, code := range []string{"c00", "c03", "c07", "c29"} {
		want, _ := src.Get(code)
		got, err := dst.Get(code)
		if err != nil && !errors.Is(err, link.ErrDeleted) {
			t.Fatal(err)
		}
		if got.Version <= 100 {
			t.Errorf("%s: version %d, not the restore's own", code, got.Version)
		}
		got.Version = want.Version
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s (-source +restored):\n%s", code, d)
		}
	}
	if st, _ := dst.Clicks("c07", t0.Add(-time.Hour), t0.Add(time.Hour)); st.Totals.Humans.Total != 5 || st.Totals.Bots.Total != 2 ||
		st.Totals.Humans.Countries["DE"] != 5 || len(st.Hours) != 1 || st.Hours[0].Humans != 5 {
		t.Errorf("restored clicks: %+v", st)
	}
	part, err := dst.ListLinks(link.ListQuery{Owner: "o1", Tag: "t", Limit: 100, Now: t0})
	if err != nil || len(part.Links) != 28 { // 30, less the tombstone and c10 (another's)
		t.Fatalf("listing by owner and tag: %d links, %v", len(part.Links), err)
	}
	if tags, _ := dst.TagCounts("o1"); tags["t"] != 28 {
		t.Errorf("tag counts: %v", tags)
	}
	if r := result(t, apply(dst, (&command.CreateIfAbsent{Code: "c03", Now: t0, Request: link.CreateRequest{URL: "https://e.example/new"}}).Encode())); !errors.Is(r.Err, link.ErrAliasTaken) {
		t.Errorf("a create of the restored tombstone's code: %v", r.Err)
	}
	if r := restore(); r.Restored != 0 || r.Present != 29 || len(r.Conflicts) != 1 {
		t.Fatalf("the same restore again: %+v", r)
	}
	if st, _ := dst.Clicks("c07", t0.Add(-time.Hour), t0.Add(time.Hour)); st.Totals.Humans.Total != 5 {
		t.Errorf("clicks after the second restore: %d", st.Totals.Humans.Total)
	}
}

// TestRestoreOfABadRecordIsRejected: a record that does not decode, or a
// link no create could make, is refused at apply as any bad entry is, and
// nothing of it is stored.
func TestRestoreOfABadRecordIsRejected(t *testing.T) {
	t.Parallel()
	f := mustShard(t, ShardConfig{})
	good := command.EncodeRecord(&link.Link{URL: "https://e.example", CreatedAt: t0, UpdatedAt: t0, Redirect: 302})
	bad := command.EncodeRecord(&link.Link{URL: "javascript:alert(1)", CreatedAt: t0, UpdatedAt: t0, Redirect: 302})
	for i, rl := range []command.RestoredLink{
		{Code: "ok1", Record: []byte{0xff, 0xff}},
		{Code: "ok2", Record: bad},
		{Code: "bad code!", Record: good},
	} {
		entry := &command.RestoreLinks{Links: []command.RestoredLink{{Code: "fine", Record: good}, rl}}
		if _, ok := applyAt(t, f, uint64(i+1), entry.Encode()).(*command.RestoreResult); ok {
			t.Errorf("entry %d was applied", i)
		}
	}
	if _, err := f.Get("fine"); !errors.Is(err, link.ErrNotFound) {
		t.Fatalf("a link of a rejected entry: %v", err)
	}
}
