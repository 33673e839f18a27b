package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/link"
)

// listJSON is GET /api/v1/links.
type listJSON struct {
	Links []linkJSON `json:"links"`
	// NextCursor continues the listing (null: this was the last page).
	NextCursor *string `json:"next_cursor"`
}

// cursorJSON is what a cursor holds (base64url of this JSON): the last
// link's place and the order it was listed in.
type cursorJSON struct {
	Created int64  `json:"c"`
	Clicks  uint64 `json:"n,omitempty"`
	Code    string `json:"k"`
	Desc    bool   `json:"d"`
	// ByClicks: the listing is by clicks, then creation time.
	ByClicks bool `json:"b,omitempty"`
}

// maxCursor bounds a cursor's length (a code is at most 64 bytes).
const maxCursor = 256

// handleList serves GET /api/v1/links?q=&tag=&owner=&created_after=
// &created_before=&expired=&disabled=&sort=created|-created|clicks|-clicks
// &limit=&cursor=:
// a page of the caller's live links (every owner's, or owner's, for an
// admin key), newest first by default, each with its human clicks, with
// the cursor of the next page. A listing by clicks pages by the counts it
// read: a link whose count moves between pages may be listed twice or
// not at all.
func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	q, err := s.listQuery(r)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	if q.ByClicks && !principalOf(r).may(apikey.StatsRead) {
		// The order would tell the counts a key without stats:read may
		// not read.
		s.Error(w, r, &requestError{status: http.StatusForbidden, kind: "forbidden", title: "Forbidden",
			detail: "sorting by clicks needs the stats:read scope", field: "sort"})
		return
	}
	// A filter no index answers is a scan (up to link.ListQuery.Scan
	// entries a shard): it costs listScanCost tokens, not one.
	if scanned(q) && !s.limit(w, r, principalOf(r), listScanCost-1) {
		return
	}
	page, err := s.links.List(r.Context(), q)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	out := listJSON{Links: make([]linkJSON, 0, len(page.Links))}
	clicks := principalOf(r).may(apikey.StatsRead)
	for i, l := range page.Links {
		j := s.toJSON(l)
		j.Clicks = nil // during a rolling upgrade, an older node counts none
		if page.Clicks != nil && clicks {
			j.Clicks = &page.Clicks[i]
		}
		out.Links = append(out.Links, j)
	}
	if page.Next != nil {
		c := cursorJSON{Created: page.Next.Created.UnixNano(), Code: page.Next.Code, Desc: q.Desc}
		if q.ByClicks {
			c.Clicks, c.ByClicks = page.Next.Clicks, true
		}
		b, _ := json.Marshal(c)
		next := base64.RawURLEncoding.EncodeToString(b)
		out.NextCursor = &next
	}
	writeJSON(w, r, http.StatusOK, out)
}

// listScanCost is the rate-limit tokens a listing that scans takes: its
// shards examine up to 10,000 index entries each (cluster.DefaultListScan),
// about 70 ms of CPU for a rare q on 80k links, where a listing an index
// answers costs about a millisecond.
const listScanCost = 10

// scanned reports whether q has a filter the listing indexes do not
// answer (the text, the expired or disabled state, a tag across owners),
// or is a listing by clicks that starts among the links without clicks:
// those come from a creation index, past the clicked links in it (least
// clicked first, or a cursor at 0 clicks).
func scanned(q link.ListQuery) bool {
	return q.Text != "" || q.Expired != nil || q.Disabled != nil || q.Tag != "" && q.Owner == "" ||
		q.ByClicks && (q.After == nil && !q.Desc || q.After != nil && q.After.Clicks == 0)
}

// listQuery reads a listing's query and scopes it to the caller.
func (s *Server) listQuery(r *http.Request) (link.ListQuery, error) {
	v := r.URL.Query()
	q := link.ListQuery{Text: v.Get("q"), Tag: v.Get("tag"), Owner: v.Get("owner"), Now: s.now(), Desc: true, Limit: 100}
	if len(q.Text) > 256 || len(q.Tag) > 64 || len(q.Owner) > 256 {
		return q, field("q", "q is at most 256 bytes, tag 64, owner 256", link.ErrInvalidInput)
	}
	var err error
	if q.Owner, err = ownerScope(r, q.Owner, "owner"); err != nil {
		return q, err
	}
	for _, t := range []struct {
		name string
		dst  *time.Time
	}{{"created_after", &q.CreatedAfter}, {"created_before", &q.CreatedBefore}} {
		if raw := v.Get(t.name); raw != "" {
			tm, err := time.Parse(time.RFC3339Nano, raw)
			if err != nil || tm.Year() < 1970 || tm.Year() > 9999 {
				return q, field(t.name, "must be an RFC 3339 time such as 2026-01-02T15:04:05Z", link.ErrInvalidInput)
			}
			*t.dst = tm
		}
	}
	for _, b := range []struct {
		name string
		dst  **bool
	}{{"expired", &q.Expired}, {"disabled", &q.Disabled}} {
		if raw := v.Get(b.name); raw != "" {
			x, err := strconv.ParseBool(raw)
			if err != nil {
				return q, field(b.name, "must be true or false", link.ErrInvalidInput)
			}
			*b.dst = &x
		}
	}
	switch v.Get("sort") {
	case "", "-created":
	case "created":
		q.Desc = false
	case "clicks":
		q.ByClicks, q.Desc = true, false
	case "-clicks":
		q.ByClicks = true
	default:
		return q, field("sort", "must be created, -created, clicks or -clicks", link.ErrInvalidInput)
	}
	if raw := v.Get("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > link.MaxListLimit {
			return q, field("limit", fmt.Sprintf("must be 1 to %d", link.MaxListLimit), link.ErrInvalidInput)
		}
		q.Limit = n
	}
	if raw := v.Get("cursor"); raw != "" {
		var c cursorJSON
		b, err := base64.RawURLEncoding.DecodeString(raw)
		if err != nil || len(raw) > maxCursor || json.Unmarshal(b, &c) != nil || !link.ValidCode(c.Code) || c.Created <= 0 {
			return q, field("cursor", "is not a cursor this API gave", link.ErrInvalidInput)
		}
		if c.Desc != q.Desc || c.ByClicks != q.ByClicks {
			return q, field("cursor", "belongs to a listing in another order", link.ErrInvalidInput)
		}
		q.After = &link.ListPosition{Created: time.Unix(0, c.Created).UTC(), Code: c.Code, Clicks: c.Clicks}
	}
	return q, nil
}

// handleTags serves GET /api/v1/tags?owner=&limit=1..1000 (default 100):
// the tags of the caller's live links (an admin key's: every owner's, or
// owner's) with how many links carry each, most used first.
func (s *Server) handleTags(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	owner, err := ownerScope(r, v.Get("owner"), "owner")
	if err != nil {
		s.Error(w, r, err)
		return
	}
	limit := 100
	if raw := v.Get("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > link.MaxListLimit {
			s.Error(w, r, field("limit", fmt.Sprintf("must be 1 to %d", link.MaxListLimit), link.ErrInvalidInput))
			return
		}
		limit = n
	}
	tags, partial, err := s.links.Tags(r.Context(), owner, limit)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, map[string]any{"tags": tags, "partial": partial})
}

// ownerScope is the owner whose links a request may read or change in
// bulk: an admin key's the one it names (empty: every owner), any other
// key's its own; naming another owner is 403.
func ownerScope(r *http.Request, requested, fieldName string) (string, error) {
	p := principalOf(r)
	if p.admin() {
		return requested, nil
	}
	if requested != "" && requested != p.owner() {
		return "", &requestError{status: http.StatusForbidden, kind: "forbidden", title: "Forbidden",
			detail: "a key reaches its own owner's links only", field: fieldName}
	}
	return p.owner(), nil
}
