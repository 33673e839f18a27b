package link

import (
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// Redirect status codes a link may use.
const (
	RedirectMovedPermanently = 301
	RedirectFound            = 302
	RedirectTemporary        = 307
	RedirectPermanent        = 308
	DefaultRedirect          = RedirectFound
	maxTagCount              = 32
	maxTagLength             = 64
)

// Link is one short link as stored in a shard's state machine.
type Link struct {
	// Code is the short code: a generated base62 code or a custom alias.
	Code string
	// URL is the destination, exactly as it is sent in Location.
	URL string
	// Owner identifies who created the link; empty until API keys exist.
	Owner string
	// CreatedAt and UpdatedAt are the proposer's clock at the time of the
	// command, carried inside the Raft entry.
	CreatedAt time.Time
	UpdatedAt time.Time
	// ExpiresAt is the zero time for links that never expire.
	ExpiresAt time.Time
	// Redirect is the HTTP status of the redirect (301, 302, 307 or 308).
	Redirect int
	// Disabled links answer 410 but stay readable through the API.
	Disabled bool
	// Deleted marks a tombstone: the code is never handed out again and
	// redirects answer 410.
	Deleted bool
	// MaxVisits is 0 for no limit.
	MaxVisits uint64
	// Visits counts the redirects a limited link has granted (only links
	// with MaxVisits count them, through Raft).
	Visits uint64
	// Tags are free-form labels.
	Tags []string
	// Title and Description say what the link is (owner-given, at most
	// MaxTitle and MaxDescription bytes; nothing is fetched).
	Title       string
	Description string
	// Note is the owner's private note (at most MaxNote bytes): shown to
	// those who may read the link through the API, never to its visitors
	// (not on the preview nor in a redirect).
	Note string
	// DropQuery stops the redirect from forwarding the request's query
	// string (forward_query: false); by default it is added to the
	// destination's (ForwardQuery).
	DropQuery bool
	// PasswordHash is the argon2id PHC string of the link's password
	// (internal/password), empty for an open link: a redirect then asks for
	// the password first. It never leaves the cluster.
	PasswordHash string
	// Rules send the visitors they match elsewhere (Destination); at most
	// MaxRules.
	Rules []Rule
	// Nonce is the creator's idempotency token: a create retried with the
	// same code and nonce returns the existing link instead of a conflict.
	Nonce uint64
	// Version is the Raft index of the last change.
	Version uint64
}

// Expired reports whether the link has an expiry at or before now.
func (l *Link) Expired(now time.Time) bool {
	return !l.ExpiresAt.IsZero() && !now.Before(l.ExpiresAt)
}

// Gone reports whether a redirect for the link must answer 410 at time now.
func (l *Link) Gone(now time.Time) bool {
	return l.Deleted || l.Disabled || l.Expired(now) || l.OutOfVisits()
}

// MaxVisitsLimit bounds max_visits: every granted visit of a limited link
// is a Raft entry (and a stored nonce), so limits are for small numbers.
const MaxVisitsLimit = 1_000_000

// OutOfVisits reports whether a limited link has granted all its visits.
func (l *Link) OutOfVisits() bool {
	return l.MaxVisits > 0 && l.Visits >= l.MaxVisits
}

// Clone returns a deep copy of l.
func (l *Link) Clone() *Link {
	c := *l
	if l.Tags != nil {
		c.Tags = append([]string(nil), l.Tags...)
	}
	if l.Rules != nil {
		c.Rules = append([]Rule(nil), l.Rules...)
	}
	return &c
}

// ErrBadRedirect is the field error of a redirect status a link may not
// use.
var ErrBadRedirect = &FieldError{Err: ErrInvalidInput, Field: "redirect", Reason: "must be 301, 302, 307 or 308"}

// CheckRedirect returns ErrBadRedirect unless code is a redirect status a
// link may use.
func CheckRedirect(code int) error {
	if !ValidRedirect(code) {
		return ErrBadRedirect
	}
	return nil
}

// ValidRedirect reports whether code is a redirect status a link may use.
func ValidRedirect(code int) bool {
	switch code {
	case RedirectMovedPermanently, RedirectFound, RedirectTemporary, RedirectPermanent:
		return true
	}
	return false
}

// Sentinel errors shared by every layer. Check them with errors.Is.
var (
	// ErrNotFound is returned when no link has the code.
	ErrNotFound = errors.New("link not found")
	// ErrGone is returned when a link exists but must not redirect: it is
	// deleted, disabled or expired.
	ErrGone = errors.New("link gone")
	// ErrDeleted is ErrGone for a link that was deleted: what an update, a
	// delete or a read of the live link finds at a tombstone.
	ErrDeleted = fmt.Errorf("%w: deleted", ErrGone)
	// ErrAliasTaken is returned when a create names a code that is already in
	// use, tombstones included.
	ErrAliasTaken = errors.New("alias taken")
	// ErrInvalidURL is returned for a destination that fails validation.
	ErrInvalidURL = errors.New("invalid url")
	// ErrInvalidAlias is returned for a custom alias that fails validation.
	ErrInvalidAlias = errors.New("invalid alias")
	// ErrInvalidInput is returned for any other rejected field.
	ErrInvalidInput = errors.New("invalid input")
	// ErrNotLeader is returned when a write or a consistent read reaches a
	// replica that is not the leader of its group.
	ErrNotLeader = errors.New("not leader")
	// ErrUnavailable is returned when a group cannot serve the request now
	// (no leader, shutting down, timed out); the request may be retried.
	ErrUnavailable = errors.New("unavailable")
	// ErrExhausted is returned when the ID space of the code mode is used up.
	ErrExhausted = errors.New("id space exhausted")
	// ErrInsufficientStorage is returned for a write refused because a
	// replica of its group is over its storage quota or short of disk.
	ErrInsufficientStorage = errors.New("insufficient storage")
)

// ValidateTags checks the tag list: at most 32 tags, each 1–64 printable
// characters with no control characters.
func ValidateTags(tags []string) error {
	if len(tags) > maxTagCount {
		return &FieldError{Err: ErrInvalidInput, Field: "tags", Reason: "at most 32 tags"}
	}
	for _, t := range tags {
		if t == "" || len(t) > maxTagLength {
			return &FieldError{Err: ErrInvalidInput, Field: "tags", Reason: "each tag must be 1 to 64 bytes"}
		}
		if hasControlOrSpace(t, false) {
			return &FieldError{Err: ErrInvalidInput, Field: "tags", Reason: "tags may not contain control characters"}
		}
	}
	return nil
}

// FieldError is a validation failure of one input field. It wraps one of the
// sentinel errors (ErrInvalidURL, ErrInvalidAlias, ErrInvalidInput).
type FieldError struct {
	Err    error
	Field  string
	Reason string
}

// Error implements error.
func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Unwrap returns the sentinel error.
func (e *FieldError) Unwrap() error { return e.Err }

// Click is one redirect as the handler saw it, for the analytics pipeline.
// The raw IP never leaves the pipeline: it is hashed (with the day's salt) for uniques and anonymised
// for anything kept.
type Click struct {
	Code    string
	Time    time.Time
	IP      netip.Addr
	UA      string
	Referer string
	// Private is set for DNT: 1 or Sec-GPC: 1: the click counts, but no
	// visitor hash is taken.
	Private bool
}

// Visit is one raw visit as the node that served it keeps it: node-local,
// never replicated, anonymised before it is stored, purged after the
// retention period.
type Visit struct {
	Code string    `json:"code"`
	Time time.Time `json:"time"`
	Node string    `json:"node"`
	// Network is the visitor's address with the host part zeroed (/24 for
	// IPv4, /48 for IPv6).
	Network   string `json:"network"`
	Country   string `json:"country"`
	UserAgent string `json:"user_agent"`
	// Referer is the referring page without its query and fragment.
	Referer string `json:"referer"`
	Bot     bool   `json:"bot"`
}

// CodeCount is a code with a count (orphan-visit summaries).
type CodeCount struct {
	Code  string `json:"code"`
	Count uint64 `json:"count"`
}

// OrphanSummary counts requests for codes that do not exist, as one node
// (or, gathered, the cluster) saw them since it started.
type OrphanSummary struct {
	Total uint64      `json:"total"`
	Top   []CodeCount `json:"top"`
}
