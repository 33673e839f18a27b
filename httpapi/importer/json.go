package importer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// item is one link of any JSON format: linkraft's (a line of the NDJSON
// export, or a create body), Shlink's REST API short URL, Kutt's API link,
// Bitly's API bitlink.
type item struct {
	// linkraft
	URL          string   `json:"url"`
	Alias        string   `json:"alias"`
	Code         string   `json:"code"`
	Title        string   `json:"title"`
	Description  string   `json:"description"`
	Tags         []string `json:"tags"`
	ExpiresAt    *string  `json:"expires_at"`
	Redirect     int      `json:"redirect"`
	MaxVisits    *uint64  `json:"max_visits"`
	ForwardQuery *bool    `json:"forward_query"`
	Rules        []Rule   `json:"rules"`
	Owner        string   `json:"owner"`
	Protected    bool     `json:"password_protected"`
	Disabled     bool     `json:"disabled"`
	// Shlink
	ShortCode string `json:"shortCode"`
	LongURL   string `json:"longUrl"`
	Meta      *struct {
		ValidUntil *string `json:"validUntil"`
		MaxVisits  *uint64 `json:"maxVisits"`
	} `json:"meta"`
	ShlinkForward *bool `json:"forwardQuery"`
	// Kutt (password says one is set; banned, that Kutt took it down)
	Address      string  `json:"address"`
	Target       string  `json:"target"`
	ExpireIn     *string `json:"expire_in"`
	KuttPassword bool    `json:"password"`
	Banned       bool    `json:"banned"`
	// Bitly
	BitlyLong      string   `json:"long_url"`
	Link           string   `json:"link"`
	CustomBitlinks []string `json:"custom_bitlinks"`
}

// row maps an item to a Row and names its format.
func (it *item) row() (Row, string) {
	switch {
	case it.ShortCode != "" || it.LongURL != "":
		r := Row{URL: it.LongURL, Alias: it.ShortCode, Title: it.Title, Tags: it.Tags, ForwardQuery: it.ShlinkForward}
		if it.Meta != nil {
			if it.Meta.ValidUntil != nil {
				r.ExpiresAt = *it.Meta.ValidUntil
			}
			if it.Meta.MaxVisits != nil {
				r.MaxVisits = *it.Meta.MaxVisits
			}
		}
		return r, FormatShlinkJSON
	case it.Address != "" || it.Target != "":
		r := Row{URL: it.Target, Alias: it.Address, Title: it.Description, PasswordProtected: it.KuttPassword, Disabled: it.Banned}
		if it.ExpireIn != nil {
			r.ExpiresAt = *it.ExpireIn
		}
		return r, FormatKuttJSON
	case it.BitlyLong != "":
		short := it.Link
		if len(it.CustomBitlinks) > 0 {
			short = it.CustomBitlinks[0]
		}
		return Row{URL: it.BitlyLong, Alias: lastSegment(short), Title: it.Title, Tags: it.Tags}, FormatBitlyJSON
	}
	r := Row{URL: it.URL, Alias: it.Alias, Title: it.Title, Description: it.Description, Tags: it.Tags, Redirect: it.Redirect,
		ForwardQuery: it.ForwardQuery, Rules: it.Rules, Owner: it.Owner, PasswordProtected: it.Protected, Disabled: it.Disabled}
	if r.Alias == "" {
		r.Alias = it.Code
	}
	if it.ExpiresAt != nil {
		r.ExpiresAt = *it.ExpiresAt
	}
	if it.MaxVisits != nil {
		r.MaxVisits = *it.MaxVisits
	}
	return r, FormatNDJSON
}

// wrapperKeys open the document formats: Shlink's {"shortUrls":{"data":
// […]}}, Kutt's {"total":…, "data":[…]}, Bitly's {"links":[…]}.
var wrapperKeys = map[string]bool{"shortUrls": true, "data": true, "links": true, "total": true, "limit": true, "skip": true, "pagination": true}

func newJSON(br *bufio.Reader, first byte) (*Reader, error) {
	r := &Reader{}
	bounded := &rowBound{r: br}
	dec := json.NewDecoder(bounded)
	bounded.offset = dec.InputOffset
	if first == '{' {
		// One object a line (NDJSON), or one document wrapping an array:
		// its first key tells.
		peek, _ := br.Peek(4096) // fewer at the end of a short file
		pd := json.NewDecoder(bytes.NewReader(peek))
		_, _ = pd.Token() // {
		key, _ := pd.Token()
		if k, ok := key.(string); !ok || !wrapperKeys[k] {
			r.next = r.items(dec, false)
			return r, nil
		}
		if err := openArray(dec); err != nil {
			return nil, err
		}
		r.next = r.items(dec, true)
		return r, nil
	}
	if _, err := dec.Token(); err != nil { // [
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	r.next = r.items(dec, true)
	return r, nil
}

// openArray reads a wrapper document up to the opening of its array of
// links, skipping the other members.
func openArray(dec *json.Decoder) error {
	if _, err := dec.Token(); err != nil { // {
		return err
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return fmt.Errorf("%w: %w", ErrFormat, err)
		}
		switch t {
		case "shortUrls":
			if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
				return fmt.Errorf("%w: shortUrls is not an object", ErrFormat)
			}
			continue
		case "data", "links":
			tok, err := dec.Token()
			if err != nil {
				return fmt.Errorf("%w: %w", ErrFormat, err)
			}
			if tok == json.Delim('[') {
				return nil
			}
			return fmt.Errorf("%w: %s is not an array", ErrFormat, t)
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return fmt.Errorf("%w: %w", ErrFormat, err)
		}
	}
	return fmt.Errorf("%w: the document holds no data or links array", ErrFormat)
}

// items decodes one link object at a time: the elements of an array
// (inArray, up to its end), or top-level values (NDJSON).
func (r *Reader) items(dec *json.Decoder, inArray bool) func() (Row, error) {
	return func() (Row, error) {
		if inArray && !dec.More() {
			return Row{}, io.EOF
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if err == io.EOF && !inArray {
				return Row{}, io.EOF
			}
			return Row{}, fmt.Errorf("malformed JSON after row %d: %w", r.n, err)
		}
		if len(raw) > MaxRowBytes {
			return Row{Err: fmt.Errorf("the row is over %d bytes", MaxRowBytes)}, nil
		}
		var it item
		if err := json.Unmarshal(raw, &it); err != nil {
			return Row{Err: fmt.Errorf("not a link object: %w", err)}, nil
		}
		row, format := it.row()
		if r.format == "" {
			r.format = format
		}
		return row, nil
	}
}

// rowBound fails a read that would take the parser (a JSON decoder, a CSV
// reader) more than 2*MaxRowBytes past the end of the last value or record
// it returned (offset), so that one huge value (a 100 MB string or cell)
// is refused after that much, not held whole.
type rowBound struct {
	r      io.Reader
	offset func() int64
	read   int64
}

// errRowTooLarge ends a file with a value or record over MaxRowBytes.
var errRowTooLarge = fmt.Errorf("a row is over %d bytes", MaxRowBytes)

func (b *rowBound) Read(p []byte) (int, error) {
	if b.offset != nil && b.read-b.offset() > 2*MaxRowBytes {
		return 0, errRowTooLarge
	}
	n, err := b.r.Read(p)
	b.read += int64(n)
	return n, err
}
