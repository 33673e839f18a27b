package link

import (
	"strconv"
	"strings"
	"time"
)

// MaxTTL bounds how far in the future a link may expire (100 years).
const MaxTTL = 100 * 365 * 24 * time.Hour

// CreateRequest is a link to create, as a client asks for it. Validate
// makes it one the cluster may store; the cluster adds the time, the nonce
// and (without an alias) the code.
type CreateRequest struct {
	URL   string
	Alias string // empty: the cluster generates a code
	Owner string
	// ExpiresAt, if set, must be in the future.
	ExpiresAt time.Time
	Redirect  int // 0: DefaultRedirect
	MaxVisits uint64
	Tags      []string
	// DropQuery: the redirect does not forward the request's query.
	DropQuery bool
	// Title and Description: see Link.
	Title, Description string
	// Note: see Link.
	Note string
	// PasswordHash: see Link (the caller hashes the password).
	PasswordHash string
	// Rules: see Link.
	Rules []Rule
}

// Validate checks r at now under p and normalises it (the URL, the redirect
// default, the expiry in UTC). Its errors are *FieldError. It is the one
// check of a create's input; the FSM checks again only what reaches the
// Raft log.
func (r *CreateRequest) Validate(p URLPolicy, now time.Time) error {
	if r.URL == "" {
		return &FieldError{Err: ErrInvalidURL, Field: "url", Reason: "is required"}
	}
	u, err := p.NormalizeURL(r.URL)
	if err != nil {
		return err
	}
	r.URL = u
	if r.Alias != "" {
		if err := ValidateAlias(r.Alias); err != nil {
			return err
		}
	}
	if !r.ExpiresAt.IsZero() {
		if err := checkExpiry(r.ExpiresAt, now); err != nil {
			return err
		}
		r.ExpiresAt = r.ExpiresAt.UTC()
	}
	if r.Redirect == 0 {
		r.Redirect = DefaultRedirect
	}
	if err := CheckRedirect(r.Redirect); err != nil {
		return err
	}
	if err := ValidateTags(r.Tags); err != nil {
		return err
	}
	if err := ValidateText(r.Title, r.Description); err != nil {
		return err
	}
	if err := ValidateNote(r.Note); err != nil {
		return err
	}
	if err := ValidateRules(r.Rules, p); err != nil {
		return err
	}
	if r.MaxVisits > MaxVisitsLimit {
		return &FieldError{Err: ErrInvalidInput, Field: "max_visits", Reason: "must be 1 to " + strconv.FormatUint(MaxVisitsLimit, 10)}
	}
	return nil
}

// NewLink is the link a create of r makes under code at now, with the
// creator's nonce, as of Raft index version: the one place a created
// link's fields come from (the shard FSM and the tests' fakes call it).
func (r *CreateRequest) NewLink(code string, now time.Time, nonce, version uint64) *Link {
	redirect := r.Redirect
	if redirect == 0 {
		redirect = DefaultRedirect
	}
	return &Link{
		Code:         code,
		URL:          r.URL,
		Owner:        r.Owner,
		CreatedAt:    now,
		UpdatedAt:    now,
		ExpiresAt:    r.ExpiresAt,
		Redirect:     redirect,
		MaxVisits:    r.MaxVisits,
		Tags:         r.Tags,
		Nonce:        nonce,
		DropQuery:    r.DropQuery,
		Title:        r.Title,
		Description:  r.Description,
		Note:         r.Note,
		Version:      version,
		PasswordHash: r.PasswordHash,
		Rules:        r.Rules,
	}
}

// Patch is a partial update of a link; nil fields are left alone. A
// non-nil ExpiresAt pointing at the zero time removes the expiry, a non-nil
// Tags pointing at an empty list removes the tags.
type Patch struct {
	URL       *string
	ExpiresAt *time.Time
	Redirect  *int
	Disabled  *bool
	Tags      *[]string
	DropQuery *bool
	// Title and Description: "" removes them.
	Title, Description *string
	// Note: "" removes it.
	Note *string
	// PasswordHash: "" removes the password.
	PasswordHash *string
	// Rules: an empty list removes them.
	Rules *[]Rule
}

// Empty reports whether p changes nothing.
func (p *Patch) Empty() bool {
	return p.URL == nil && p.ExpiresAt == nil && p.Redirect == nil && p.Disabled == nil && p.Tags == nil && p.DropQuery == nil &&
		p.Title == nil && p.Description == nil && p.Note == nil && p.PasswordHash == nil && p.Rules == nil
}

// ApplyTo sets the fields p sets on l: the one place an update's fields
// are applied (the shard FSM and the tests' fakes call it). The caller
// sets UpdatedAt and Version.
func (p *Patch) ApplyTo(l *Link) {
	set(&l.URL, p.URL)
	set(&l.ExpiresAt, p.ExpiresAt)
	set(&l.Redirect, p.Redirect)
	set(&l.Disabled, p.Disabled)
	set(&l.Tags, p.Tags)
	set(&l.DropQuery, p.DropQuery)
	set(&l.Title, p.Title)
	set(&l.Description, p.Description)
	set(&l.Note, p.Note)
	set(&l.PasswordHash, p.PasswordHash)
	set(&l.Rules, p.Rules)
}

// set copies *v to *dst when v is set.
func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// Validate checks p at now under policy and normalises its URL, as
// CreateRequest.Validate.
func (p *Patch) Validate(policy URLPolicy, now time.Time) error {
	if p.URL != nil {
		u, err := policy.NormalizeURL(*p.URL)
		if err != nil {
			return err
		}
		p.URL = &u
	}
	if p.ExpiresAt != nil && !p.ExpiresAt.IsZero() {
		if err := checkExpiry(*p.ExpiresAt, now); err != nil {
			return err
		}
		t := p.ExpiresAt.UTC()
		p.ExpiresAt = &t
	}
	if p.Redirect != nil {
		if err := CheckRedirect(*p.Redirect); err != nil {
			return err
		}
	}
	if p.Tags != nil {
		if err := ValidateTags(*p.Tags); err != nil {
			return err
		}
	}
	if p.Rules != nil {
		if err := ValidateRules(*p.Rules, policy); err != nil {
			return err
		}
	}
	var title, desc, note string
	if p.Title != nil {
		title = *p.Title
	}
	if p.Description != nil {
		desc = *p.Description
	}
	if p.Note != nil {
		note = *p.Note
	}
	if err := ValidateText(title, desc); err != nil {
		return err
	}
	return ValidateNote(note)
}

// Bounds of a link's title, description and note, in bytes.
const (
	MaxTitle       = 256
	MaxDescription = 1024
	MaxNote        = 1024
)

// ValidateNote checks a note as a description: valid UTF-8 within
// MaxNote bytes, line breaks allowed, no other control or format
// characters.
func ValidateNote(note string) error {
	if len(note) > MaxNote || hasControlOrSpace(strings.ReplaceAll(note, "\n", " "), false) {
		return &FieldError{Err: ErrInvalidInput, Field: "note", Reason: "must be at most 1024 bytes of text"}
	}
	return nil
}

// ValidateText checks a title (one line) and a description (line breaks
// allowed): valid UTF-8 within their bounds, without control or format
// characters.
func ValidateText(title, description string) error {
	if len(title) > MaxTitle || hasControlOrSpace(title, false) {
		return &FieldError{Err: ErrInvalidInput, Field: "title", Reason: "must be at most 256 bytes of text on one line"}
	}
	if len(description) > MaxDescription || hasControlOrSpace(strings.ReplaceAll(description, "\n", " "), false) {
		return &FieldError{Err: ErrInvalidInput, Field: "description", Reason: "must be at most 1024 bytes of text"}
	}
	return nil
}

func checkExpiry(t, now time.Time) error {
	if !t.After(now) {
		return &FieldError{Err: ErrInvalidInput, Field: "expires_at", Reason: "is in the past"}
	}
	if t.Sub(now) > MaxTTL {
		return &FieldError{Err: ErrInvalidInput, Field: "expires_at", Reason: "is more than 100 years away"}
	}
	return nil
}
