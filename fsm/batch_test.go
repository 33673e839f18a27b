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
	if r := result(t, applyAt(t, f, 1, (&command.CreateIfAbsent{Code: "old", URL: "https://old.example", Now: t0, Nonce: 7}).Encode())); r.Err != nil {
		t.Fatal(r.Err)
	}
	batch := &command.CreateBatch{Creates: []command.CreateIfAbsent{
		{Code: "a1", URL: "https://a.example/1", Now: t0, Nonce: 11, Tags: []string{"x"}},
		{Code: "old", URL: "https://taken.example", Now: t0, Nonce: 12}, // taken before
		{Code: "old", URL: "https://old.example", Now: t0, Nonce: 7},    // the earlier create, retried
		{Code: "a2", URL: "https://a.example/2", Now: t0, Nonce: 13},
		{Code: "a2", URL: "https://a.example/dup", Now: t0, Nonce: 14}, // taken by the batch itself
	}}
	out, ok := applyAt(t, f, 2, batch.Encode()).(*BatchResult)
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
