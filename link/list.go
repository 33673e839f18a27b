package link

import (
	"slices"
	"strings"
	"time"
)

// ListQuery selects and orders live links for a listing.
type ListQuery struct {
	// Owner, if set, lists that owner's links only.
	Owner string
	// Tag, if set, keeps links with that tag.
	Tag string
	// Text, if set, keeps links whose code, URL or title holds it (case
	// folded).
	Text string
	// CreatedAfter and CreatedBefore bound the creation time (exclusive;
	// zero: unbounded).
	CreatedAfter, CreatedBefore time.Time
	// Expired and Disabled, if set, keep links that are (true) or are not
	// (false) expired at Now, or disabled.
	Expired, Disabled *bool
	Now               time.Time
	// Desc lists newest (or with ByClicks, most clicked) first.
	Desc bool
	// ByClicks orders by human clicks first, then creation time and code.
	ByClicks bool
	// After, if set, starts past this position (a page's last link):
	// links sort by creation time (or clicks), then code.
	After *ListPosition
	// Limit bounds the links returned.
	Limit int
	// Scan, if set, bounds the index entries a shard examines for the
	// page: a filter its index does not answer (Text, Expired, Disabled,
	// Tag across owners) may pass few of them, and a page stops where
	// the scan did rather than read a whole shard.
	Scan int `json:",omitempty"`
}

// ListPosition is a link's place in a listing.
type ListPosition struct {
	Created time.Time
	// Clicks is the place in a listing by clicks (before Created).
	Clicks uint64 `json:",omitempty"`
	Code   string
}

// Matches reports whether l passes q's filters other than the owner and
// the creation range (which a listing reads from its index).
func (q *ListQuery) Matches(l *Link) bool {
	switch {
	case q.Tag != "" && !slices.Contains(l.Tags, q.Tag):
		return false
	case q.Expired != nil && l.Expired(q.Now) != *q.Expired:
		return false
	case q.Disabled != nil && l.Disabled != *q.Disabled:
		return false
	case q.Text != "":
		t := strings.ToLower(q.Text)
		return strings.Contains(strings.ToLower(l.Code), t) || strings.Contains(strings.ToLower(l.URL), t) ||
			strings.Contains(strings.ToLower(l.Title), t)
	}
	return true
}

// MaxListLimit bounds a listing's page.
const MaxListLimit = 1000

// ListPage is one page of a listing: the links, their human clicks (nil
// if some node could not count them: an older version), and where the
// next page starts (nil: this is the last).
type ListPage struct {
	Links  []*Link
	Clicks []uint64
	Next   *ListPosition
}

// TagCount is a tag and how many live links carry it.
type TagCount struct {
	Tag   string `json:"tag"`
	Links uint64 `json:"links"`
}
