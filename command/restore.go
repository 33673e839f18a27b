package command

import (
	"bytes"
	"fmt"

	"github.com/linkraft/linkraft/internal/wire"
	"github.com/linkraft/linkraft/link"
)

// RestoreLinks puts links read from a backup into their shard, each as the
// backup holds it (tombstones too, so that their codes stay gone), with its
// clicks: the shard's part of a restore. A code the shard holds already is
// left as it is: the same record (a restore run again after it was cut
// short) counts as present, another as a conflict. The response is a
// *RestoreResult.
type RestoreLinks struct {
	Links []RestoredLink
}

// RestoredLink is one code of a backup.
type RestoredLink struct {
	// Record is the link's stored form (EncodeRecord).
	Record []byte
	Code   string
	// Clicks are its click totals and hours (zero: none).
	Clicks ClickStats
}

// MaxRestoreBatch bounds the links of one RestoreLinks entry.
const MaxRestoreBatch = 512

// Link decodes r's record and checks it as a create of its fields is
// checked (a tombstone: its code and owner).
func (r *RestoredLink) Link() (*link.Link, error) {
	if err := checkCode(r.Code); err != nil {
		return nil, err
	}
	l, err := DecodeRecord([]byte(r.Code), r.Record)
	if err != nil {
		return nil, invalid("record of %q: %v", r.Code, err)
	}
	// The record's fields and a create's share their numbers
	// (linkFields): its bytes read as a create are its settable fields.
	c, err := createCodec.Decode(EncodeLink(l))
	if err != nil {
		return nil, invalid("record of %q: %v", r.Code, err)
	}
	if !l.Deleted {
		if err := checkURL(c.Request.URL); err != nil {
			return nil, err
		}
	}
	if err := checkFields(&c.Request); err != nil {
		return nil, fmt.Errorf("record of %q: %w", r.Code, err)
	}
	return l, nil
}

// Same reports whether stored, a record the shard holds, is r's.
func (r *RestoredLink) Same(stored *link.Link) bool {
	l, err := DecodeRecord([]byte(r.Code), r.Record)
	if err != nil {
		return false
	}
	l.Version = stored.Version // the restore's own: see fsm
	return bytes.Equal(EncodeRecord(l), EncodeRecord(stored))
}

// Size is r's encoded size.
func (r *RestoredLink) Size() int { return len(restoredCodec.Append(nil, r)) }

// Delta is r's clicks as a click batch's delta for its code.
func (r *RestoredLink) Delta() []byte {
	return deltaCodec.Append(nil, &ClickDelta{Code: r.Code, Delta: r.Clicks.Totals, Hours: r.Clicks.Hours})
}

// HasClicks reports whether r carries clicks.
func (r *RestoredLink) HasClicks() bool {
	return len(r.Clicks.Totals.AppendTo(nil)) > 0 || len(r.Clicks.Hours) > 0
}

const (
	fRestoreLink   = 1
	fRestoredCode  = 1
	fRestoredRec   = 2
	fRestoredClick = 3
)

var (
	restoredCodec = wire.NewCodec(nil,
		wire.String(fRestoredCode, func(r *RestoredLink) *string { return &r.Code }),
		wire.Bytes(fRestoredRec, func(r *RestoredLink) *[]byte { return &r.Record }),
		wire.Message(fRestoredClick, clickStatsCodec, func(r *RestoredLink) *ClickStats { return &r.Clicks }),
	)
	restoreCodec = wire.NewCodec(func(r *RestoreLinks) error {
		if len(r.Links) == 0 || len(r.Links) > MaxRestoreBatch {
			return fmt.Errorf("%w: a restore of %d links", wire.ErrDecode, len(r.Links))
		}
		return nil
	}, wire.Messages(fRestoreLink, restoredCodec, func(r *RestoreLinks) *[]RestoredLink { return &r.Links }))
)

// Encode returns the Raft entry for r.
func (r *RestoreLinks) Encode() []byte {
	return restoreCodec.Append([]byte{byte(TypeRestoreLinks)}, r)
}

// validate checks every link of r as its create would be.
func (r *RestoreLinks) validate() error {
	for i := range r.Links {
		if _, err := r.Links[i].Link(); err != nil {
			return err
		}
	}
	return nil
}

// RestoreResult answers a RestoreLinks: how many links it put, how many
// were there already as the backup holds them, and the codes held by
// another link.
type RestoreResult struct {
	Restored, Present int
	Conflicts         []string
}
