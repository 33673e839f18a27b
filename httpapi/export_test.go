package httpapi_test

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/linkraft/linkraft/link"
)

// TestExportStreamsEveryLink: GET /api/v1/links/export gives every live
// link of the caller's owner, oldest first, as NDJSON (the link JSON) or
// CSV (one header row), past the size of one listing page; deleted
// links and other owners' are left out; "export" cannot be an alias.
func TestExportStreamsEveryLink(t *testing.T) {
	t.Parallel()
	tn := startFake(t, link.URLPolicy{}, nil)
	_, alice := tn.makeKey(t, "alice", "alice", "links:read", "links:write")
	var reqs []string
	for i := range 1203 { // more than a listing page (1,000)
		reqs = append(reqs, fmt.Sprintf(`{"url":"https://example.com/%d","alias":"exp-%04d","tags":["a","b c"],"title":"T, \"%d\""}`, i, i, i))
	}
	for i := 0; i < len(reqs); i += 500 {
		body := `{"links":[` + strings.Join(reqs[i:min(i+500, len(reqs))], ",") + `]}`
		if r := tn.do(t, "POST", "/api/v1/links/bulk", "application/json", []byte(body), "Authorization", bearer(alice)); r.status != 200 {
			t.Fatalf("bulk: %d %s", r.status, r.body)
		}
	}
	tn.do(t, "DELETE", "/api/v1/links/exp-0007", "", nil, "Authorization", bearer(alice))
	tn.create(t, `{"url":"https://example.com/admin","alias":"not-alices"}`)
	var want []string
	for i := range 1203 {
		if i != 7 {
			want = append(want, fmt.Sprintf("exp-%04d", i))
		}
	}

	r := tn.do(t, "GET", "/api/v1/links/export", "", nil, "Authorization", bearer(alice))
	if r.status != 200 || r.header.Get("Content-Type") != "application/x-ndjson" || !strings.Contains(r.header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("ndjson: %d %v", r.status, r.header)
	}
	var got []string
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		got = append(got, l["code"].(string))
		if l["owner"] != "alice" || l["tags"].([]any)[1] != "b c" {
			t.Fatalf("exported %v", l)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ndjson export: %d codes, want %d", len(got), len(want))
	}

	r = tn.do(t, "GET", "/api/v1/links/export?format=csv", "", nil, "Authorization", bearer(alice))
	rows, err := csv.NewReader(bytes.NewReader(r.body)).ReadAll()
	if r.status != 200 || err != nil || len(rows) != len(want)+1 || rows[0][0] != "code" || rows[0][2] != "url" {
		t.Fatalf("csv: %d, %d rows, %v", r.status, len(rows), err)
	}
	if row := rows[1]; row[0] != "exp-0000" || row[3] != `T, "0"` || row[5] != "a;b c" || row[6] != "alice" || row[13] != "true" {
		t.Fatalf("csv row %q", row)
	}

	if r := tn.do(t, "GET", "/api/v1/links/export?format=xml", "", nil, "Authorization", bearer(alice)); r.status != 400 {
		t.Fatalf("format=xml: %d", r.status)
	}
	if r := tn.do(t, "GET", "/api/v1/links/export?owner=admin", "", nil, "Authorization", bearer(alice)); r.status != 403 {
		t.Fatalf("another owner's export: %d", r.status)
	}
	if r := tn.postJSON(t, "/api/v1/links", `{"url":"https://example.com/e","alias":"export"}`); r.status != 400 {
		t.Fatalf("alias export: %d %s", r.status, r.body)
	}
}

// TestExportOutlastsTheWriteTimeout: an export that takes longer than the
// server's write timeout (here 1 s; each page of a slow cluster takes
// 400 ms) is whole: the timeout holds for each page, not the export.
func TestExportOutlastsTheWriteTimeout(t *testing.T) {
	t.Parallel()
	tn := startFake(t, link.URLPolicy{}, nil)
	tn.srv.Config.WriteTimeout = time.Second
	fake := tn.roles.links.(*fakeLinks)
	var b strings.Builder
	b.WriteString(`{"links":[`)
	for i := range 1000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"url":"https://example.com/slow/%d"}`, i)
	}
	b.WriteString(`]}`)
	for range 3 {
		if r := tn.postJSON(t, "/api/v1/links/bulk", b.String()); r.status != 200 {
			t.Fatalf("bulk: %d", r.status)
		}
	}
	fake.mu.Lock()
	fake.listDelay = 400 * time.Millisecond
	fake.mu.Unlock()
	start := time.Now()
	r := tn.do(t, "GET", "/api/v1/links/export", "", nil)
	if lines := strings.Count(string(r.body), "\n"); r.status != 200 || lines != 3000 {
		t.Fatalf("export: %d, %d lines after %v", r.status, lines, time.Since(start))
	}
}
