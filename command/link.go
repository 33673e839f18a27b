package command

import (
	"time"

	"github.com/linkraft/linkraft/internal/wire"
	"github.com/linkraft/linkraft/link"
)

// A link is one message with two forms. The wire form (EncodeLink), in
// answers between nodes, has every field. The record form (EncodeRecord),
// kept in the shard's bbolt file under the code as key, leaves out what the
// key or a default already says (the code, an UpdatedAt equal to
// CreatedAt, the default redirect): about 20 of ~110 bytes for a 60-byte
// URL. DecodeRecord puts them back.

// EncodeLink returns the wire form of a link.
func EncodeLink(l *link.Link) []byte { return linkCodec.Append(make([]byte, 0, 80+len(l.URL)), l) }

// DecodeLink parses what EncodeLink returned.
func DecodeLink(b []byte) (*link.Link, error) { return linkCodec.Decode(b) }

// EncodeRecord returns the record form of a link.
func EncodeRecord(l *link.Link) []byte {
	return recordCodec.Append(make([]byte, 0, 64+len(l.URL)), l)
}

// DecodeRecord parses a link record stored under key; a record in the
// wire form decodes the same.
func DecodeRecord(key, v []byte) (*link.Link, error) {
	l, err := linkCodec.Decode(v)
	if err != nil {
		return nil, err
	}
	if l.Code == "" {
		l.Code = string(key)
	}
	if l.UpdatedAt.IsZero() {
		l.UpdatedAt = l.CreatedAt
	}
	if l.Redirect == 0 {
		l.Redirect = link.DefaultRedirect
	}
	return l, nil
}

// linkFields are a link's fields in writing order; the stored form leaves
// some out (EncodeRecord).
func linkFields(stored bool) []wire.Field[link.Link] {
	always := func(*link.Link) bool { return true }
	code, updated, redirect := always, always, always
	if stored {
		code = func(*link.Link) bool { return false }
		updated = func(l *link.Link) bool { return !l.UpdatedAt.Equal(l.CreatedAt) }
		redirect = func(l *link.Link) bool { return l.Redirect != link.DefaultRedirect }
	}
	return []wire.Field[link.Link]{
		wire.Only(wire.String(fCode, func(l *link.Link) *string { return &l.Code }), code),
		wire.String(fURL, func(l *link.Link) *string { return &l.URL }),
		wire.String(fOwner, func(l *link.Link) *string { return &l.Owner }),
		wire.Time(fCreated, func(l *link.Link) *time.Time { return &l.CreatedAt }),
		wire.Only(wire.Time(fUpdated, func(l *link.Link) *time.Time { return &l.UpdatedAt }), updated),
		wire.Time(fExpires, func(l *link.Link) *time.Time { return &l.ExpiresAt }),
		wire.Only(wire.Int(fRedirect, func(l *link.Link) *int { return &l.Redirect }), redirect),
		wire.Bool(fDisabled, func(l *link.Link) *bool { return &l.Disabled }),
		wire.Bool(fDeleted, func(l *link.Link) *bool { return &l.Deleted }),
		wire.Uint(fMaxVisits, func(l *link.Link) *uint64 { return &l.MaxVisits }),
		wire.Strings(fTag, func(l *link.Link) *[]string { return &l.Tags }),
		wire.Uint(fNonce, func(l *link.Link) *uint64 { return &l.Nonce }),
		wire.Uint(fVersion, func(l *link.Link) *uint64 { return &l.Version }),
		wire.Uint(fVisits, func(l *link.Link) *uint64 { return &l.Visits }),
		wire.Bool(fDropQuery, func(l *link.Link) *bool { return &l.DropQuery }),
		wire.String(fTitle, func(l *link.Link) *string { return &l.Title }),
		wire.String(fDesc, func(l *link.Link) *string { return &l.Description }),
		wire.String(fPassword, func(l *link.Link) *string { return &l.PasswordHash }),
		wire.Messages(fRules, ruleCodec, func(l *link.Link) *[]link.Rule { return &l.Rules }),
	}
}

var (
	linkCodec   = wire.NewCodec(nil, linkFields(false)...)
	recordCodec = wire.NewCodec(nil, linkFields(true)...)
)

// RecordView is what some paths read of a stored link record without
// decoding it whole: the click path's index update (owner, creation time,
// deleted), a listing's text filter (URL, title). The byte fields are views
// of the record.
type RecordView struct {
	Owner, URL, Title []byte
	Created           time.Time
	Deleted           bool
}

// ViewRecord reads a RecordView of a stored link record.
func ViewRecord(v []byte) (RecordView, error) {
	var rv RecordView
	r := wire.NewReader(v)
	for num, typ := range r.Fields() {
		switch num {
		case fOwner:
			rv.Owner = r.Bytes(typ, num)
		case fURL:
			rv.URL = r.Bytes(typ, num)
		case fTitle:
			rv.Title = r.Bytes(typ, num)
		case fCreated:
			rv.Created = r.Time(typ, num)
		case fDeleted:
			rv.Deleted = r.Uint(typ, num) != 0
		default:
			r.Skip(num, typ)
		}
	}
	return rv, r.Err()
}
