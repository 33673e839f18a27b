// Package importer reads the links of an import file: linkraft's own CSV
// and NDJSON (what GET /api/v1/links/export writes, or a CSV with the
// header url,alias,title,tags,expires_at,redirect), and the exports of
// Shlink (its web client's CSV, its REST API's JSON), Kutt (its API's
// JSON), YOURLS (the Import Export plugin's CSV, a yourls_url table dump)
// and Bitly (its API's JSON; its web CSV by column names), told apart by
// their header row or fields. It reads one row at a time, so a file of any
// size costs one row's memory.
package importer

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
)

// Row is one link as a file gives it. The caller validates it as a create.
type Row struct {
	// N is the row's number, from 1 (data rows; the header is not one).
	N int
	// Err is set for a row that could not be read (the rest is empty).
	Err error

	URL, Alias, Title, Description string
	Tags                           []string
	// ExpiresAt is RFC 3339 ("" for none).
	ExpiresAt    string
	Redirect     int
	MaxVisits    uint64
	ForwardQuery *bool
	Rules        []Rule
	// Owner is the row's owner column, if the file has one (linkraft's
	// export).
	Owner string
	// PasswordProtected and Disabled are what linkraft's export says of
	// the link (the importer refuses such rows: see httpapi).
	PasswordProtected, Disabled bool
}

// Rule is a redirect rule as the files hold it (linkraft's).
type Rule struct {
	Device   string `json:"device,omitempty"`
	Country  string `json:"country,omitempty"`
	Language string `json:"language,omitempty"`
	URL      string `json:"url"`
}

// Formats a Reader detects.
const (
	FormatCSV         = "csv"
	FormatNDJSON      = "ndjson"
	FormatShlinkCSV   = "shlink-csv"
	FormatShlinkJSON  = "shlink-json"
	FormatKuttJSON    = "kutt-json"
	FormatYOURLSCSV   = "yourls-csv"
	FormatYOURLSTable = "yourls-table"
	FormatBitlyCSV    = "bitly-csv"
	FormatBitlyJSON   = "bitly-json"
)

// ErrFormat is returned by New for a file of no known format.
var ErrFormat = errors.New("not a known import format")

// MaxRowBytes bounds one CSV record or JSON value.
const MaxRowBytes = 64 << 10

// Reader yields the rows of an import file.
type Reader struct {
	format string
	next   func() (Row, error)
	n      int
}

// Format names the detected format.
func (r *Reader) Format() string { return r.format }

// Next returns the next row, or io.EOF after the last. A row that cannot be
// read comes back with Err set, and reading goes on where the format
// allows; an error ends the file (malformed JSON, a read error).
func (r *Reader) Next() (Row, error) {
	row, err := r.next()
	if err != nil {
		return Row{}, err
	}
	r.n++
	row.N = r.n
	return row, nil
}

// New detects the format of in from its first bytes: JSON (an object,
// an array or one object a line) or CSV by its header row.
func New(in io.Reader) (*Reader, error) {
	br := bufio.NewReaderSize(in, 64<<10)
	first, err := firstByte(br)
	if err != nil {
		return nil, fmt.Errorf("%w: the file is empty", ErrFormat)
	}
	if first == '{' || first == '[' {
		return newJSON(br, first)
	}
	return newCSV(br)
}

func firstByte(br *bufio.Reader) (byte, error) {
	for {
		b, err := br.ReadByte()
		if err != nil {
			return 0, err
		}
		if b == 0xEF { // a UTF-8 byte order mark
			if p, _ := br.Peek(2); bytes.Equal(p, []byte{0xBB, 0xBF}) {
				_, _ = br.Discard(2)
				continue
			}
		}
		if b != ' ' && b != '\t' && b != '\r' && b != '\n' {
			return b, br.UnreadByte()
		}
	}
}

// norm is a header name compared loosely: lower case, no spaces,
// underscores or hyphens.
func norm(s string) string {
	return strings.NewReplacer(" ", "", "_", "", "-", "", "\ufeff", "").Replace(strings.ToLower(strings.TrimSpace(s)))
}

// lastSegment is the code of a short URL (https://s.test/abc → abc,
// bit.ly/abc → abc), or s itself when it has no slash.
func lastSegment(s string) string {
	s = strings.TrimSpace(s)
	if u, err := url.Parse(s); err == nil && u.Path != "" {
		s = u.Path
	}
	s = strings.Trim(s, "/")
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// splitTags splits a tags cell on sep, dropping empty ones.
func splitTags(s, sep string) []string {
	var out []string
	for _, t := range strings.Split(s, sep) {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

func newCSV(br *bufio.Reader) (*Reader, error) {
	bounded := &rowBound{r: br}
	cr := csv.NewReader(bounded)
	bounded.offset = cr.InputOffset
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("%w: no CSV header row: %w", ErrFormat, err)
	}
	col := map[string]int{}
	for i, h := range head {
		if _, dup := col[norm(h)]; !dup {
			col[norm(h)] = i
		}
	}
	has := func(names ...string) bool {
		for _, n := range names {
			if _, ok := col[n]; !ok {
				return false
			}
		}
		return true
	}
	first := func(names ...string) int {
		for _, n := range names {
			if i, ok := col[n]; ok {
				return i
			}
		}
		return -1
	}
	var format string
	var m func(rec []string, cell func(int) string) Row
	switch {
	case has("shortcode", "longurl"):
		format = FormatShlinkCSV
		m = func(_ []string, cell func(int) string) Row {
			tags := cell(col["tags"])
			sep := "|"
			if strings.Contains(tags, ",") {
				sep = ","
			}
			return Row{URL: cell(col["longurl"]), Alias: cell(col["shortcode"]), Title: cell(first("title")), Tags: splitTags(tags, sep)}
		}
	case has("shorturl", "longurl"): // Shlink's web client before 2023-04
		format = FormatShlinkCSV
		m = func(_ []string, cell func(int) string) Row {
			return Row{URL: cell(col["longurl"]), Alias: lastSegment(cell(col["shorturl"])), Title: cell(first("title")), Tags: splitTags(cell(first("tags")), ",")}
		}
	case has("source", "target"):
		format = FormatYOURLSCSV
		m = func(_ []string, cell func(int) string) Row {
			return Row{URL: cell(col["target"]), Alias: strings.Trim(cell(col["source"]), "/")}
		}
	case has("keyword", "url"):
		format = FormatYOURLSTable
		m = func(_ []string, cell func(int) string) Row {
			return Row{URL: cell(col["url"]), Alias: cell(col["keyword"]), Title: cell(first("title"))}
		}
	case first("longurl", "destinationurl") >= 0:
		format = FormatBitlyCSV
		short := first("custombitlink", "customlink", "bitlink", "link")
		m = func(_ []string, cell func(int) string) Row {
			return Row{URL: cell(first("longurl", "destinationurl")), Alias: lastSegment(cell(short)), Title: cell(first("title")),
				Tags: splitTags(cell(first("tags")), ",")}
		}
	case has("url"):
		format = FormatCSV
		m = func(_ []string, cell func(int) string) Row {
			text := func(i int) string { return csvUnsafe(cell(i)) } // as our export wrote it
			row := Row{URL: cell(col["url"]), Alias: text(first("alias", "code")), Title: text(first("title")),
				Description: text(first("description")), Tags: splitTags(text(first("tags")), ";"),
				ExpiresAt: cell(first("expiresat")), Owner: text(first("owner"))}
			if err := parseCSVExtras(&row, cell, first); err != nil {
				return Row{Err: err}
			}
			return row
		}
	default:
		return nil, fmt.Errorf("%w: the CSV header names no destination column (url, longUrl, target, long_url)", ErrFormat)
	}
	r := &Reader{format: format}
	r.next = func() (Row, error) {
		rec, err := cr.Read()
		if err == io.EOF {
			return Row{}, io.EOF
		}
		var pe *csv.ParseError
		if errors.As(err, &pe) && !errors.Is(err, csv.ErrFieldCount) {
			return Row{Err: fmt.Errorf("malformed CSV: %w", err)}, nil
		}
		if err != nil && !errors.Is(err, csv.ErrFieldCount) {
			return Row{}, err
		}
		size := 0
		for _, f := range rec {
			size += len(f)
		}
		if size > MaxRowBytes {
			return Row{Err: fmt.Errorf("the row is over %d bytes", MaxRowBytes)}, nil
		}
		cell := func(i int) string {
			if i < 0 || i >= len(rec) {
				return ""
			}
			return strings.TrimSpace(rec[i])
		}
		return m(rec, cell), nil
	}
	return r, nil
}

// parseCSVExtras reads linkraft's own columns past the simple ones.
func parseCSVExtras(row *Row, cell func(int) string, first func(...string) int) error {
	if v := cell(first("redirect")); v != "" {
		if _, err := fmt.Sscan(v, &row.Redirect); err != nil {
			return fmt.Errorf("redirect: %q is not a number", v)
		}
	}
	if v := cell(first("maxvisits")); v != "" {
		if _, err := fmt.Sscan(v, &row.MaxVisits); err != nil {
			return fmt.Errorf("max_visits: %q is not a number", v)
		}
	}
	if v := cell(first("forwardquery")); v != "" {
		b := v == "true"
		if !b && v != "false" {
			return fmt.Errorf("forward_query: %q is not true or false", v)
		}
		row.ForwardQuery = &b
	}
	for _, b := range []struct {
		name string
		dst  *bool
	}{{"passwordprotected", &row.PasswordProtected}, {"disabled", &row.Disabled}} {
		if v := cell(first(b.name)); v != "" {
			if v != "true" && v != "false" {
				return fmt.Errorf("%s: %q is not true or false", b.name, v)
			}
			*b.dst = v == "true"
		}
	}
	if v := cell(first("rules")); v != "" {
		dec := json.NewDecoder(strings.NewReader(v))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&row.Rules); err != nil {
			return fmt.Errorf("rules: not a JSON array of rules: %w", err)
		}
	}
	return nil
}

// formulaStart are the first characters that make a spreadsheet read a
// cell as a formula (OWASP's CSV injection list), and the quote that
// CSVSafe puts before them.
const formulaStart = "=+-@\t\r'"

// CSVSafe returns s as a CSV cell that a spreadsheet shows as text: one
// that would start a formula (=, +, -, @, a tab or a CR) gets a single quote
// first, and so does one that starts with a quote, so that csvUnsafe's
// removal of one quote gives back exactly s.
func CSVSafe(s string) string {
	if s != "" && strings.IndexByte(formulaStart, s[0]) >= 0 {
		return "'" + s
	}
	return s
}

// csvUnsafe undoes CSVSafe.
func csvUnsafe(s string) string {
	if len(s) > 1 && s[0] == '\'' && strings.IndexByte(formulaStart, s[1]) >= 0 {
		return s[1:]
	}
	return s
}
