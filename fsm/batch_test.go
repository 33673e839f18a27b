package fsm

import (
	"errors"
	"testing"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/link"
)

// TestCreateBatchAppliesEachCreateAlone: every create of a batch gets the
// answer it would get alone — new codes are made, a code in use (stored
// before, or earlier in the same batch) is taken, and a retried create
// (same nonce) returns the link it made — and the batch is one entry.
func TestCreateBatchAppliesEachCreateAlone(t *testing.T) {
	var changed []string
	f := mustShard(t, ShardConfig{OnChange: func(l *link.Link) { changed = append(changed, l.Code) }})
	if r := result(t, applyAt(t, f, 1, (&command.CreateIfAbsent{Code: "old", Now: t0, Nonce: 7, Request: link.CreateRequest{URL: "https://old.example"}}).Encode())); r.Err != nil {
		t.Fatal(r.Err)
	}
	batch := &command.CreateBatch{Creates: []command.CreateIfAbsent{
		{Code: "a1", Now: t0, Nonce: 11, Request: link.CreateRequest{URL: "https://a.example/1", Tags: []string{"x"}}},
		{Code: "old", Now: t0, Nonce: 12, Request: link.CreateRequest{URL: "https://taken.example"}}, // taken before
		{Code: "old", Now: t0, Nonce: 7, Request: link.CreateRequest{URL: "https://old.example"}},    // the earlier create, retried
		{Code: "a2", Now: t0, Nonce: 13, Request: link.CreateRequest{URL: "https://a.example/2"}},
		{Code: "a2", Now: t0, Nonce: 14, Request: link.CreateRequest{URL: "https://a.example/dup"}}, // taken by the batch itself
	}}
	out, ok := applyAt(t, f, 2, batch.Encode()).(*command.BatchResult)
	if !ok || len(out.Results) != len(batch.Creates) {
		t.Fatalf("batch response %#v", out)
	}
	want := []struct {
		err error
		url string
	}{{nil, "https://a.example/1"}, {link.ErrAliasTaken, ""}, {nil, "https://old.example"}, {nil, "https://a.example/2"}, {link.ErrAliasTaken, ""}}
	for i, w := range want {
		r := out.Results[i]
		if !errors.Is(r.Err, w.err) || (w.err == nil && (r.Link == nil || r.Link.URL != w.url)) {
			t.Errorf("create %d = %+v, want err %v url %q", i, r, w.err, w.url)
		}
	}
	if l := out.Results[0].Link; l.Version != 2 || len(l.Tags) != 1 || !l.CreatedAt.Equal(t0) {
		t.Errorf("created link %+v", l)
	}
	for code, url := range map[string]string{"a1": "https://a.example/1", "a2": "https://a.example/2", "old": "https://old.example"} {
		l, err := f.Get(code)
		if err != nil || l.URL != url {
			t.Errorf("stored %s = %+v, %v", code, l, err)
		}
	}
	if f.AppliedIndex() != 2 {
		t.Errorf("applied index %d", f.AppliedIndex())
	}
	if len(changed) != 3 { // old (index 1), a1, a2
		t.Errorf("change notifications %v", changed)
	}
}
