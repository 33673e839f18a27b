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

var (
	linkCodec   = wire.NewCodec(nil, recordFields(false)...)
	recordCodec = wire.NewCodec(nil, recordFields(true)...)
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
