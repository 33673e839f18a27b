package command

import (
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/internal/wire"
)

// CreateKey stores a key. First marks the cluster's first admin key, made
// by the meta leader when it writes the settings: it is applied only if no
// key was ever made, so two leaders racing to make it make one.
type CreateKey struct {
	Key   apikey.Key
	First bool
}

// RevokeKey deletes the key with ID.
type RevokeKey struct {
	ID string
	At time.Time
}

// SetBlocked adds Domain to the blocklist, or removes it.
type SetBlocked struct {
	Domain  string
	Blocked bool
	At      time.Time
}

const (
	fKeyID      = 1
	fKeyName    = 2
	fKeyOwner   = 3
	fKeyScopes  = 4
	fKeyRate    = 5
	fKeyCreated = 6
	fKeyHash    = 7
	fKeyFirst   = 8

	fRevokeID = 1
	fRevokeAt = 2

	fBlockDomain = 1
	fBlockOn     = 2
	fBlockAt     = 3

	// maxBlockedDomain is a DNS name's longest form.
	maxBlockedDomain = 253
)

// keyFields are an API key's fields; a CreateKey is the key and its First
// flag, and the key record stored in the meta group is the same bytes.
func keyFields() []wire.Field[CreateKey] {
	return []wire.Field[CreateKey]{
		wire.String(fKeyID, func(c *CreateKey) *string { return &c.Key.ID }),
		wire.String(fKeyName, func(c *CreateKey) *string { return &c.Key.Name }),
		wire.String(fKeyOwner, func(c *CreateKey) *string { return &c.Key.Owner }),
		wire.Uint(fKeyScopes, func(c *CreateKey) *apikey.Scope { return &c.Key.Scopes }),
		wire.Uint(fKeyRate, func(c *CreateKey) *uint32 { return &c.Key.RateLimit }),
		wire.Time(fKeyCreated, func(c *CreateKey) *time.Time { return &c.Key.CreatedAt }),
		{Num: fKeyHash,
			Put: func(b []byte, num protowire.Number, c *CreateKey) []byte {
				return wire.AppendBytes(b, num, c.Key.Hash[:])
			},
			Get: func(r wire.Reader, typ protowire.Type, num protowire.Number, c *CreateKey) wire.Reader {
				h := r.Bytes(typ, num)
				if r.Err() == nil && len(h) != len(c.Key.Hash) {
					r.SetErr(invalid("key hash of %d bytes", len(h)))
				}
				copy(c.Key.Hash[:], h)
				return r
			}},
		wire.Bool(fKeyFirst, func(c *CreateKey) *bool { return &c.First }),
	}
}

var createKeyCodec = wire.NewCodec(nil, keyFields()...)

// Encode returns the Raft entry for c.
func (c *CreateKey) Encode() []byte { return createKeyCodec.Append([]byte{byte(TypeCreateKey)}, c) }

// AppendTo appends the message (the meta group's record of it).
func (c *CreateKey) AppendTo(b []byte) []byte { return createKeyCodec.Append(b, c) }

// Unmarshal reads what AppendTo wrote.
func (c *CreateKey) Unmarshal(body []byte) error { return createKeyCodec.DecodeInto(body, c) }

func (c *CreateKey) validate() error {
	k := &c.Key
	if !apikey.ValidID(k.ID) {
		return invalid("key id %q", truncate(k.ID))
	}
	if len(k.Name) > maxStoredOwner || k.Owner == "" || len(k.Owner) > maxStoredOwner {
		return invalid("key name or owner empty or over %d bytes", maxStoredOwner)
	}
	if k.Scopes == 0 {
		return invalid("key without scopes")
	}
	if k.Hash == (apikey.Hash{}) {
		return invalid("key without a hash")
	}
	return nil
}

var revokeKeyCodec = wire.NewCodec[RevokeKey](nil,
	wire.String(fRevokeID, func(r *RevokeKey) *string { return &r.ID }),
	wire.Time(fRevokeAt, func(r *RevokeKey) *time.Time { return &r.At }),
)

// Encode returns the Raft entry for r.
func (r *RevokeKey) Encode() []byte { return revokeKeyCodec.Append([]byte{byte(TypeRevokeKey)}, r) }

func (r *RevokeKey) validate() error {
	if !apikey.ValidID(r.ID) {
		return invalid("key id %q", truncate(r.ID))
	}
	return nil
}

var setBlockedCodec = wire.NewCodec[SetBlocked](nil,
	wire.String(fBlockDomain, func(s *SetBlocked) *string { return &s.Domain }),
	wire.Bool(fBlockOn, func(s *SetBlocked) *bool { return &s.Blocked }),
	wire.Time(fBlockAt, func(s *SetBlocked) *time.Time { return &s.At }),
)

// Encode returns the Raft entry for s.
func (s *SetBlocked) Encode() []byte { return setBlockedCodec.Append([]byte{byte(TypeSetBlocked)}, s) }

// AppendTo appends the message (the meta group's record of it).
func (c *SetBlocked) AppendTo(b []byte) []byte { return setBlockedCodec.Append(b, c) }

// Unmarshal reads what AppendTo wrote.
func (c *SetBlocked) Unmarshal(body []byte) error { return setBlockedCodec.DecodeInto(body, c) }

func (s *SetBlocked) validate() error {
	if s.Domain == "" || len(s.Domain) > maxBlockedDomain || s.Domain != strings.ToLower(s.Domain) || strings.ContainsAny(s.Domain, " /:\x00") {
		return invalid("blocked domain %q", truncate(s.Domain))
	}
	return nil
}

// IsFirstKey reports whether entry is a CreateKey of the first admin key.
func IsFirstKey(entry []byte) bool {
	if len(entry) == 0 || Type(entry[0]) != TypeCreateKey {
		return false
	}
	c, err := createKeyCodec.Decode(entry[1:])
	return err == nil && c.First
}
