package importer

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func readAll(t *testing.T, in io.Reader) (string, []Row, error) {
	t.Helper()
	r, err := New(in)
	if err != nil {
		return "", nil, err
	}
	var rows []Row
	for {
		row, err := r.Next()
		if err == io.EOF {
			return r.Format(), rows, nil
		}
		if err != nil {
			return r.Format(), rows, err
		}
		rows = append(rows, row)
	}
}

func ptr[T any](v T) *T { return &v }

// TestFormats reads a fixture of each format (made from that project's
// documented export) into rows.
func TestFormats(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		file, format string
		rows         []Row
	}{
		{"shlink.csv", FormatShlinkCSV, []Row{
			{N: 1, URL: "https://store.steampowered.com", Alias: "12C18", Title: "Welcome to Steam", Tags: []string{"games", "tech"}},
			{N: 2, URL: "https://shlink.io/documentation/", Alias: "docs-page"}}},
		{"shlink-old.csv", FormatShlinkCSV, []Row{{N: 1, URL: "https://example.com/old", Alias: "old1", Title: "Old export", Tags: []string{"a", "b"}}}},
		{"shlink.json", FormatShlinkJSON, []Row{
			{N: 1, URL: "https://store.steampowered.com", Alias: "12C18", Title: "Welcome to Steam", Tags: []string{"games", "tech"},
				ExpiresAt: "2031-01-01T00:00:00+00:00", MaxVisits: 100, ForwardQuery: ptr(false)},
			{N: 2, URL: "https://example.com/plain", Alias: "plain", Tags: []string{}, ForwardQuery: ptr(true)}}},
		{"kutt.json", FormatKuttJSON, []Row{
			{N: 1, URL: "https://example.com/spring", Alias: "spring24", Title: "Spring Sale"},
			{N: 2, URL: "https://example.com/k2", Alias: "k2", ExpiresAt: "2031-06-01T00:00:00.000Z"}}},
		{"yourls.csv", FormatYOURLSCSV, []Row{
			{N: 1, URL: "https://example.com/spring-sale", Alias: "promo"}, {N: 2, URL: "https://example.com/y2", Alias: "y2"}}},
		{"yourls-table.csv", FormatYOURLSTable, []Row{{N: 1, URL: "https://ozh.org/", Alias: "ozh", Title: "Ozh's blog"}}},
		{"bitly.json", FormatBitlyJSON, []Row{
			{N: 1, URL: "https://example.com/spring", Alias: "spring24-b", Title: "Spring Sale", Tags: []string{"promo", "q1"}},
			{N: 2, URL: "https://example.com/other", Alias: "3kX9def", Tags: []string{}}}},
		{"bitly.csv", FormatBitlyCSV, []Row{{N: 1, URL: "https://example.com/spring", Alias: "spring24-c", Title: "Spring Sale", Tags: []string{"promo", "q1"}}}},
		{"simple.csv", FormatCSV, []Row{
			{N: 1, URL: "https://example.com/a", Alias: "simple-a", Title: "First", Tags: []string{"team", "docs"}, ExpiresAt: "2031-01-01T00:00:00Z", Redirect: 301},
			{N: 2, URL: "https://example.com/b"},
			{N: 3, URL: "javascript:alert(1)", Alias: "bad-one"}}},
	} {
		f, err := os.Open("testdata/" + c.file)
		if err != nil {
			t.Fatal(err)
		}
		format, rows, err := readAll(t, f)
		f.Close()
		if err != nil || format != c.format {
			t.Errorf("%s: format %q, %v; want %q", c.file, format, err, c.format)
			continue
		}
		if d := cmp.Diff(c.rows, rows); d != "" {
			t.Errorf("%s (-want +got):\n%s", c.file, d)
		}
	}
}

// TestLinkraftNDJSONAndCSVRoundTrip: the export's own forms come back
// with every field the export has.
func TestLinkraftNDJSONAndCSVRoundTrip(t *testing.T) {
	t.Parallel()
	nd := `{"code":"abc","short_url":"http://sho.rt/abc","qr_url":"x","url":"https://e.example/","title":"T","description":"D","created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z","expires_at":"2031-01-01T00:00:00Z","redirect":308,"disabled":false,"tags":["x"],"max_visits":5,"forward_query":false,"password_protected":false,"rules":[{"device":"ios","url":"https://i.example/"}],"owner":"team","blocked":false}
{"code":"def","url":"https://f.example/","expires_at":null,"max_visits":null,"tags":[],"rules":[]}
`
	format, rows, err := readAll(t, strings.NewReader(nd))
	want := []Row{
		{N: 1, URL: "https://e.example/", Alias: "abc", Title: "T", Description: "D", Tags: []string{"x"}, ExpiresAt: "2031-01-01T00:00:00Z",
			Redirect: 308, MaxVisits: 5, ForwardQuery: ptr(false), Rules: []Rule{{Device: "ios", URL: "https://i.example/"}}, Owner: "team"},
		{N: 2, URL: "https://f.example/", Alias: "def", Tags: []string{}, Rules: []Rule{}},
	}
	if err != nil || format != FormatNDJSON {
		t.Fatalf("ndjson: %q %v", format, err)
	}
	if d := cmp.Diff(want, rows); d != "" {
		t.Fatalf("ndjson (-want +got):\n%s", d)
	}
	csv := "code,short_url,url,title,description,tags,owner,created_at,updated_at,expires_at,redirect,disabled,max_visits,forward_query,password_protected,rules\n" +
		`abc,http://sho.rt/abc,https://e.example/,T,D,x,team,2026-01-01T00:00:00Z,2026-01-01T00:00:00Z,2031-01-01T00:00:00Z,308,false,5,false,false,"[{""device"":""ios"",""url"":""https://i.example/""}]"` + "\n"
	format, rows, err = readAll(t, strings.NewReader(csv))
	if err != nil || format != FormatCSV {
		t.Fatalf("csv: %q %v", format, err)
	}
	if d := cmp.Diff(want[:1], rows); d != "" {
		t.Fatalf("csv (-want +got):\n%s", d)
	}
}

// TestBadFiles: no known header is ErrFormat; a bad row is that row's
// error and the next row is read; a malformed JSON file ends with an
// error; a value over MaxRowBytes is refused without reading it whole.
func TestBadFiles(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"", "   \n", "name,email\nx,y\n", `{"shortUrls":{"data":{}}}`, `{"total":1}`} {
		if _, _, err := readAll(t, strings.NewReader(in)); !errors.Is(err, ErrFormat) {
			t.Errorf("%q: %v, want ErrFormat", in, err)
		}
	}
	_, rows, err := readAll(t, strings.NewReader("url,redirect,rules\nhttps://a.example/,abc,\nhttps://b.example/,,[{\"nope\":1}]\nhttps://c.example/,302,\n"))
	if err != nil || len(rows) != 3 || rows[0].Err == nil || rows[1].Err == nil || rows[2].Err != nil || rows[2].Redirect != 302 {
		t.Fatalf("bad rows: %+v %v", rows, err)
	}
	_, rows, err = readAll(t, strings.NewReader("[{\"url\":\"https://a.example/\"}, {\"url\": 7}, {\"url\":\"https://b.example/\"} , {"))
	if err == nil || len(rows) != 3 || rows[1].Err == nil || rows[2].URL != "https://b.example/" {
		t.Fatalf("json with a bad item and a cut end: %+v %v", rows, err)
	}
	huge := `[{"url":"https://a.example/"},{"url":"` + strings.Repeat("x", 10*MaxRowBytes) + `"}]`
	_, rows, err = readAll(t, strings.NewReader(huge))
	if err == nil || len(rows) != 1 || !strings.Contains(err.Error(), "over") {
		t.Fatalf("a huge value: %d rows, %v", len(rows), err)
	}
	hugeCell := "url\nhttps://a.example/\n\"" + strings.Repeat("x", 10*MaxRowBytes) + "\"\n"
	_, rows, err = readAll(t, strings.NewReader(hugeCell))
	if err == nil || len(rows) != 1 || !strings.Contains(err.Error(), "over") {
		t.Fatalf("a huge CSV cell: %d rows, %v", len(rows), err)
	}
	bom := "\ufeffurl\nhttps://a.example/\n"
	if format, rows, err := readAll(t, strings.NewReader(bom)); err != nil || format != FormatCSV || len(rows) != 1 {
		t.Fatalf("a byte order mark: %q %v %v", format, rows, err)
	}
}

// FuzzImport: any file is read without a panic, a row at a time, never
// past MaxRowBytes of one row, and reading ends.
func FuzzImport(f *testing.F) {
	for _, name := range []string{"shlink.csv", "shlink.json", "kutt.json", "yourls.csv", "bitly.json", "simple.csv"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"code":"a","url":"x","rules":[{"device":"ios"}]}` + "\n" + `{"url":7}`))
	f.Add([]byte("url,rules\nx,\"[{\"\"url\"\":1}]\"\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := New(bytes.NewReader(in))
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("New: %v is not ErrFormat", err)
			}
			return
		}
		for i := 0; ; i++ {
			row, err := r.Next()
			if err != nil {
				return
			}
			if i > len(in) {
				t.Fatalf("%d rows from %d bytes", i, len(in))
			}
			// A JSON string's invalid UTF-8 byte decodes as U+FFFD (three
			// bytes): a URL is at most three times the file.
			if row.N != i+1 || len(row.URL) > 3*len(in) {
				t.Fatalf("row %+v", row)
			}
		}
	})
}

// TestCSVSafe: every cell that would start a formula is quoted, and
// csvUnsafe gives back exactly what CSVSafe was given.
func TestCSVSafe(t *testing.T) {
	for _, s := range []string{"", "plain", "=1+1", "+1", "-x", "@SUM(A1)", "\tx", "\rx", "'", "'=", "''=x", "'plain", "a=b"} {
		got := CSVSafe(s)
		if got != "" && strings.ContainsRune("=+-@\t\r", rune(got[0])) {
			t.Errorf("CSVSafe(%q) = %q starts a formula", s, got)
		}
		if back := csvUnsafe(got); back != s {
			t.Errorf("csvUnsafe(CSVSafe(%q)) = %q", s, back)
		}
	}
}
