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
		return MatchesText(q, l.Code, l.URL, l.Title)
	}
	return true
}

// MatchesText reports whether q.Text (case folded) is in the code, the URL
// or the title: Matches's text filter, for a listing that reads them from
// the stored record before it decodes the link.
func MatchesText[T string | []byte](q *ListQuery, code, url, title T) bool {
	t := strings.ToLower(q.Text)
	return containsLower(code, t) || containsLower(url, t) || containsLower(title, t)
}

// containsLower reports whether strings.ToLower(s) holds lower (itself
// lower case), without a copy of s when both are ASCII.
func containsLower[T string | []byte](s T, lower string) bool {
	if !isASCII(s) || !isASCII(lower) {
		return strings.Contains(strings.ToLower(string(s)), lower)
	}
	n := len(lower)
	for i := 0; i+n <= len(s); i++ {
		j := 0
		for ; j < n; j++ {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != lower[j] {
				break
			}
		}
		if j == n {
			return true
		}
	}
	return false
}

func isASCII[T string | []byte](s T) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
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

// ListPart is one shard's part of a listing: its links in the listing's
// order with their human clicks, and, when its scan ran out
// (ListQuery.Scan), the last position it examined: links past it were not
// looked at.
type ListPart struct {
	Links  []*Link
	Clicks []uint64
	Stop   *ListPosition
}

// TagCount is a tag and how many live links carry it.
type TagCount struct {
	Tag   string `json:"tag"`
	Links uint64 `json:"links"`
}
