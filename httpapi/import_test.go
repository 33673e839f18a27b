package httpapi_test

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/linkraft/linkraft/link"
)

// importFile posts body to /api/v1/links/import and returns the per-row
// results and the summary line.
func (tn *testNode) importFile(t *testing.T, body []byte, hdr ...string) ([]map[string]any, map[string]any) {
	t.Helper()
	r := tn.do(t, "POST", "/api/v1/links/import", "text/plain", body, hdr...)
	if r.status != 200 || r.header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("import: %d %s", r.status, r.body)
	}
	var rows []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		rows = append(rows, m)
	}
	if len(rows) == 0 || rows[len(rows)-1]["done"] != true {
		t.Fatalf("no summary line: %s", r.body)
	}
	return rows[:len(rows)-1], rows[len(rows)-1]
}

// TestImportEachFormat imports each fixture (made from that project's
// documented export) into a real node: the links it holds are made under
// their codes with their fields, a bad row fails alone, and the summary
// names the format.
func TestImportEachFormat(t *testing.T) {
	t.Parallel()
	tn := startNode(t, link.URLPolicy{})
	for _, c := range []struct {
		file, format string
		created      int
		check        map[string]string // code -> destination
	}{
		{"shlink.csv", "shlink-csv", 2, map[string]string{"12C18": "https://store.steampowered.com", "docs-page": "https://shlink.io/documentation/"}},
		{"shlink.json", "shlink-json", 1, map[string]string{"plain": "https://example.com/plain"}}, // 12C18 is taken by now
		// Each fixture's two-character code fails alone: linkraft's aliases
		// are 3 to 64 characters.
		{"kutt.json", "kutt-json", 1, map[string]string{"spring24": "https://example.com/spring"}},
		{"yourls.csv", "yourls-csv", 1, map[string]string{"promo": "https://example.com/spring-sale"}},
		{"yourls-table.csv", "yourls-table", 1, map[string]string{"ozh": "https://ozh.org/"}},
		{"bitly.json", "bitly-json", 2, map[string]string{"spring24-b": "https://example.com/spring"}},
		{"bitly.csv", "bitly-csv", 1, map[string]string{"spring24-c": "https://example.com/spring"}},
		{"simple.csv", "csv", 2, map[string]string{"simple-a": "https://example.com/a"}},
	} {
		body, err := os.ReadFile("importer/testdata/" + c.file)
		if err != nil {
			t.Fatal(err)
		}
		rows, sum := tn.importFile(t, body)
		if sum["format"] != c.format || sum["created"] != float64(c.created) || sum["rows"] != float64(len(rows)) {
			t.Errorf("%s: summary %v, want format %s and %d created", c.file, sum, c.format, c.created)
		}
		for code, dest := range c.check {
			if r := tn.do(t, "GET", "/api/v1/links/"+code, "", nil); r.status != 200 || r.json(t)["url"] != dest {
				t.Errorf("%s: %s: %d %s", c.file, code, r.status, r.body)
			}
		}
	}
	// Fields of the richer formats.
	l := tn.do(t, "GET", "/api/v1/links/simple-a", "", nil).json(t)
	if l["title"] != "First" || l["redirect"] != float64(301) || l["expires_at"] != "2031-01-01T00:00:00Z" || strings.Join(toStrings(l["tags"]), ",") != "team,docs" {
		t.Errorf("simple-a: %v", l)
	}
	l = tn.do(t, "GET", "/api/v1/links/12C18", "", nil).json(t)
	if l["title"] != "Welcome to Steam" || strings.Join(toStrings(l["tags"]), ",") != "games,tech" {
		t.Errorf("12C18: %v", l)
	}
	// The bad row of simple.csv failed alone, as a create would.
	rows, _ := tn.importFile(t, []byte("url,alias\njavascript:alert(1),evil\nhttps://example.com/ok,fine-one\n"))
	if rows[0]["status"] != float64(400) || rows[0]["problem"].(map[string]any)["type"] != "/problems/invalid-url" || rows[1]["status"] != float64(201) {
		t.Fatalf("rows: %v", rows)
	}
	// What an import cannot carry fails its row: a password link (the
	// export has no password), a disabled link (it would be live), an
	// owner that is no owner name.
	rows, _ = tn.importFile(t, []byte(`{"url":"https://example.com/p","code":"pw-link","password_protected":true}
{"url":"https://example.com/d","code":"off-link","disabled":true}
{"url":"https://example.com/o","code":"odd-owner","owner":"alice\u0000zz"}
{"url":"https://example.com/k","code":"kept-link","owner":"carol"}
`))
	for i, field := range []string{"password_protected", "disabled", "owner"} {
		if rows[i]["status"] != float64(400) || rows[i]["problem"].(map[string]any)["field"] != field {
			t.Errorf("row %d: %v, want 400 on %s", i+1, rows[i], field)
		}
	}
	if rows[3]["status"] != float64(201) || rows[3]["link"].(map[string]any)["owner"] != "carol" {
		t.Errorf("an admin's import keeps a valid owner: %v", rows[3])
	}
	kutt := []byte(`{"total":2,"data":[{"address":"kutt-pw","target":"https://example.com/kp","password":true},{"address":"kutt-ban","target":"https://example.com/kb","banned":true}]}`)
	if rows, _ := tn.importFile(t, kutt); rows[0]["status"] != float64(400) || rows[1]["status"] != float64(400) {
		t.Errorf("Kutt's password and banned links: %v", rows)
	}
	before := tn.storedState(t)
	for _, bad := range []string{"", "name,email\nx,y\n", "\x00\x01binary"} {
		if r := tn.do(t, "POST", "/api/v1/links/import", "text/csv", []byte(bad)); r.status != 400 || r.json(t)["type"] != "/problems/unknown-format" {
			t.Errorf("import of %q: %d %s", bad, r.status, r.body)
		}
	}
	// A JSON file cut short: the rows before the cut are stored, and the
	// summary says why it stopped.
	rows, sum := tn.importFile(t, []byte(`[{"url":"https://example.com/cut1","alias":"cut-one"},{"url":`))
	if len(rows) != 1 || rows[0]["status"] != float64(201) || sum["problem"] == nil {
		t.Fatalf("cut file: %v %v", rows, sum)
	}
	if after := tn.storedState(t); strings.Count(after, "\n") != strings.Count(before, "\n")+1 {
		t.Fatalf("refused imports stored links")
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// TestExportImportRoundTrip: every link exported from one cluster (NDJSON
// and CSV, by an admin key) and imported into a fresh one comes back with
// its code, owner, destination, title, description, tags, expiry,
// redirect, visit limit, query forwarding and rules.
func TestExportImportRoundTrip(t *testing.T) {
	t.Parallel()
	src := startNode(t, link.URLPolicy{})
	_, bob := src.makeKey(t, "bob", "bob", "links:read", "links:write")
	src.waitKey(t, bob)
	for _, b := range []string{
		`{"url":"https://example.com/1","alias":"rt-one","title":"One","description":"line one\nline two","tags":["a","b"],"redirect":308,"expires_at":"2031-02-03T04:05:06Z","max_visits":9}`,
		`{"url":"https://example.com/2?x=1","forward_query":false,"rules":[{"device":"ios","url":"https://apps.example/"},{"country":"DE","language":"de","url":"https://example.de/"}]}`,
		`{"url":"https://example.com/3","title":"=cmd|' /C calc'!A0,\"quoted\""}`,
		// Cells a spreadsheet would run as formulas, and quotes.
		`{"url":"https://example.com/4","alias":"-minus","title":"+1+1","description":"@SUM(A1)","tags":["-neg","x"]}`,
		`{"url":"https://example.com/5","title":"'quoted","description":"''=twice"}`,
	} {
		src.create(t, b)
	}
	if r := src.do(t, "POST", "/api/v1/links", "application/json", []byte(`{"url":"https://example.com/bob","alias":"bobs"}`), "Authorization", bearer(bob)); r.status != 201 {
		t.Fatalf("bob: %d", r.status)
	}
	want := exported(t, src, "ndjson")
	if len(want) != 6 {
		t.Fatalf("exported %d links", len(want))
	}
	// In the CSV, no cell starts a formula.
	recs, err := csv.NewReader(bytes.NewReader(src.do(t, "GET", "/api/v1/links/export?format=csv", "", nil).body)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		for _, cell := range rec {
			if cell != "" && strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
				t.Errorf("a CSV cell a spreadsheet would run: %q", cell)
			}
		}
	}
	for _, format := range []string{"ndjson", "csv"} {
		dst := startNode(t, link.URLPolicy{})
		body := src.do(t, "GET", "/api/v1/links/export?format="+format, "", nil).body
		rows, sum := dst.importFile(t, body)
		if sum["created"] != float64(6) || sum["failed"] != float64(0) {
			t.Fatalf("%s import: %v %v", format, sum, rows)
		}
		if d := cmp.Diff(want, exported(t, dst, "ndjson")); d != "" {
			t.Errorf("%s round trip (-source +imported):\n%s", format, d)
		}
	}
}

// exported is tn's NDJSON export, less what a new cluster sets anew (its
// URLs and times), keyed by code.
func exported(t *testing.T, tn *testNode, format string) map[string]map[string]any {
	t.Helper()
	r := tn.do(t, "GET", "/api/v1/links/export?format="+format, "", nil)
	out := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(string(r.body)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		for _, k := range []string{"created_at", "updated_at", "short_url", "qr_url"} {
			delete(m, k)
		}
		out[m["code"].(string)] = m
	}
	return out
}

// TestImportStreamsLargeFiles: a file of several chunks (500 rows each) is
// answered while it is still being sent: the client sends the first 600
// rows, and sends the rest only after it has read the first row's result.
// An import that read the whole body before answering would never answer
// (the test gives up after 20 s). Every row is answered, in order.
func TestImportStreamsLargeFiles(t *testing.T) {
	t.Parallel()
	tn := startNode(t, link.URLPolicy{})
	rows := func(from, to int) string {
		var b strings.Builder
		for i := from; i < to; i++ {
			fmt.Fprintf(&b, "https://example.com/big/%d,big\n", i)
		}
		return b.String()
	}
	const n = 1200
	pr, pw := io.Pipe()
	firstSeen := make(chan struct{})
	go func() {
		if _, err := io.WriteString(pw, "url,tags\n"+rows(0, 600)); err != nil {
			return
		}
		select {
		case <-firstSeen:
		case <-time.After(20 * time.Second):
			pw.CloseWithError(fmt.Errorf("no result came back while the body was being sent"))
			return
		}
		_, _ = io.WriteString(pw, rows(600, n))
		pw.Close()
	}()
	req, err := http.NewRequest("POST", tn.srv.URL+"/api/v1/links/import", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tn.key)
	req.Header.Set("Content-Type", "text/csv")
	// A client of its own: the test transport reads a request's whole body
	// before sending it.
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var got []map[string]any
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if len(got) == 0 {
			close(firstSeen)
		}
		got = append(got, m)
	}
	if len(got) != n+1 || got[n]["created"] != float64(n) {
		t.Fatalf("%d lines; last %v (%v)", len(got), got[len(got)-1], sc.Err())
	}
	for i, r := range got[:n] {
		if r["row"] != float64(i+1) || r["status"] != float64(201) {
			t.Fatalf("row %d: %v", i+1, r)
		}
	}
	if r := tn.do(t, "GET", "/api/v1/tags", "", nil); !strings.Contains(string(r.body), `{"tag":"big","links":1200}`) {
		t.Fatalf("tags: %s", r.body)
	}
}
