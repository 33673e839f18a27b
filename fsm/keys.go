package fsm

import (
	"errors"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/linkraft/linkraft/internal/apikey"
)

// The meta group holds the cluster's API keys (their SHA-256 only, never a
// secret) and its blocklist of destination domains. Every node holds a
// replica of the meta group, so every node answers "whose key is this?" and
// "is this domain blocked?" from its own state; KeysVersion tells a cache
// when to reload.

// Meta command types of keys and the blocklist.
const (
	TypeCreateKey  CommandType = 36
	TypeRevokeKey  CommandType = 37
	TypeSetBlocked CommandType = 38
)

var (
	bucketKeys    = []byte("apikeys")   // key id -> key record
	bucketBlocked = []byte("blocklist") // domain -> blocked at
	keyFirstKey   = []byte("first-key") // in settings: a key was ever made
)

// Errors of key commands (in KeyResult.Err).
var (
	// ErrKeyExists answers a CreateKey whose ID or hash is taken.
	ErrKeyExists = errors.New("fsm: key exists")
	// ErrKeyNotFound answers a RevokeKey of an unknown ID.
	ErrKeyNotFound = errors.New("fsm: no such key")
	// ErrFirstKeyMade answers a CreateKey marked First once any key was
	// ever made: the first key is made once per cluster.
	ErrFirstKeyMade = errors.New("fsm: the first key was made before")
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

// KeyResult answers a CreateKey, RevokeKey or SetBlocked.
type KeyResult struct {
	Key *apikey.Key
	Err error
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
func keyFields() []field[CreateKey] {
	return []field[CreateKey]{
		strField(fKeyID, func(c *CreateKey) *string { return &c.Key.ID }),
		strField(fKeyName, func(c *CreateKey) *string { return &c.Key.Name }),
		strField(fKeyOwner, func(c *CreateKey) *string { return &c.Key.Owner }),
		uintField(fKeyScopes, func(c *CreateKey) *apikey.Scope { return &c.Key.Scopes }),
		uintField(fKeyRate, func(c *CreateKey) *uint32 { return &c.Key.RateLimit }),
		timeField(fKeyCreated, func(c *CreateKey) *time.Time { return &c.Key.CreatedAt }),
		{num: fKeyHash,
			put: func(b []byte, num protowire.Number, c *CreateKey) []byte { return appendBytes(b, num, c.Key.Hash[:]) },
			get: func(r fieldReader, typ protowire.Type, num protowire.Number, c *CreateKey) fieldReader {
				h := r.bytes(typ, num)
				if r.err == nil && len(h) != len(c.Key.Hash) {
					r.setErr(invalid("key hash of %d bytes", len(h)))
				}
				copy(c.Key.Hash[:], h)
				return r
			}},
		boolField(fKeyFirst, func(c *CreateKey) *bool { return &c.First }),
	}
}

var createKeyCodec = newCodec(nil, keyFields()...)

// Encode returns the Raft entry for c.
func (c *CreateKey) Encode() []byte { return createKeyCodec.append([]byte{byte(TypeCreateKey)}, c) }

func decodeCreateKey(body []byte) (*CreateKey, error) { return createKeyCodec.decode(body) }

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

var revokeKeyCodec = newCodec[RevokeKey](nil,
	strField(fRevokeID, func(r *RevokeKey) *string { return &r.ID }),
	timeField(fRevokeAt, func(r *RevokeKey) *time.Time { return &r.At }),
)

// Encode returns the Raft entry for r.
func (r *RevokeKey) Encode() []byte { return revokeKeyCodec.append([]byte{byte(TypeRevokeKey)}, r) }

func decodeRevokeKey(body []byte) (*RevokeKey, error) { return revokeKeyCodec.decode(body) }

func (r *RevokeKey) validate() error {
	if !apikey.ValidID(r.ID) {
		return invalid("key id %q", truncate(r.ID))
	}
	return nil
}

var setBlockedCodec = newCodec[SetBlocked](nil,
	strField(fBlockDomain, func(s *SetBlocked) *string { return &s.Domain }),
	boolField(fBlockOn, func(s *SetBlocked) *bool { return &s.Blocked }),
	timeField(fBlockAt, func(s *SetBlocked) *time.Time { return &s.At }),
)

// Encode returns the Raft entry for s.
func (s *SetBlocked) Encode() []byte { return setBlockedCodec.append([]byte{byte(TypeSetBlocked)}, s) }

func decodeSetBlocked(body []byte) (*SetBlocked, error) { return setBlockedCodec.decode(body) }

func (s *SetBlocked) validate() error {
	if s.Domain == "" || len(s.Domain) > maxBlockedDomain || s.Domain != strings.ToLower(s.Domain) || strings.ContainsAny(s.Domain, " /:\x00") {
		return invalid("blocked domain %q", truncate(s.Domain))
	}
	return nil
}

func (f *MetaFSM) applyCreateKey(tx *bolt.Tx, c *CreateKey) any {
	settings := tx.Bucket(bucketSettings)
	if c.First && settings.Get(keyFirstKey) != nil {
		return &KeyResult{Err: ErrFirstKeyMade}
	}
	b := tx.Bucket(bucketKeys)
	if b.Get([]byte(c.Key.ID)) != nil {
		return &KeyResult{Err: fmt.Errorf("%w: id %s", ErrKeyExists, c.Key.ID)}
	}
	taken := false
	_ = b.ForEach(func(_, v []byte) error {
		if k, err := decodeKeyRecord(v); err == nil && k.Hash == c.Key.Hash {
			taken = true
		}
		return nil
	})
	if taken {
		return &KeyResult{Err: fmt.Errorf("%w: that secret is in use", ErrKeyExists)}
	}
	if err := b.Put([]byte(c.Key.ID), createKeyCodec.append(nil, &CreateKey{Key: c.Key})); err != nil {
		panic(fmt.Sprintf("fsm %s: put key: %v", f.path, err))
	}
	if err := settings.Put(keyFirstKey, []byte{1}); err != nil {
		panic(fmt.Sprintf("fsm %s: put first-key marker: %v", f.path, err))
	}
	f.keysChanged = true
	k := c.Key
	return &KeyResult{Key: &k}
}

func (f *MetaFSM) applyRevokeKey(tx *bolt.Tx, r *RevokeKey) any {
	b := tx.Bucket(bucketKeys)
	v := b.Get([]byte(r.ID))
	if v == nil {
		return &KeyResult{Err: ErrKeyNotFound}
	}
	k, _ := decodeKeyRecord(v)
	if err := b.Delete([]byte(r.ID)); err != nil {
		panic(fmt.Sprintf("fsm %s: delete key: %v", f.path, err))
	}
	f.keysChanged = true
	return &KeyResult{Key: k}
}

func (f *MetaFSM) applySetBlocked(tx *bolt.Tx, s *SetBlocked) any {
	b := tx.Bucket(bucketBlocked)
	var err error
	if s.Blocked {
		err = b.Put([]byte(s.Domain), appendTime(nil, fBlockAt, s.At))
	} else {
		err = b.Delete([]byte(s.Domain))
	}
	if err != nil {
		panic(fmt.Sprintf("fsm %s: blocklist: %v", f.path, err))
	}
	f.keysChanged = true
	return &KeyResult{}
}

func decodeKeyRecord(v []byte) (*apikey.Key, error) {
	c, err := decodeCreateKey(v)
	if err != nil {
		return nil, err
	}
	return &c.Key, nil
}

// KeysVersion changes whenever the keys or the blocklist may have changed
// (a committed key or blocklist command, a restore): a cache of Keys and
// Blocked reloads when it sees a new value.
func (f *MetaFSM) KeysVersion() uint64 { return f.keysVersion.Load() }

// Keys returns every key (without secrets: there are none stored).
func (f *MetaFSM) Keys() ([]apikey.Key, error) {
	var out []apikey.Key
	err := f.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketKeys).ForEach(func(_, v []byte) error {
			k, err := decodeKeyRecord(v)
			if err != nil {
				return err
			}
			out = append(out, *k)
			return nil
		})
	})
	apikey.Sort(out)
	return out, err
}

// FirstKeyMade reports whether a key was ever made in this cluster.
func (f *MetaFSM) FirstKeyMade() (bool, error) {
	made := false
	err := f.view(func(tx *bolt.Tx) error {
		made = tx.Bucket(bucketSettings).Get(keyFirstKey) != nil
		return nil
	})
	return made, err
}

// BlockedDomains returns the blocklist with when each domain was added.
func (f *MetaFSM) BlockedDomains() (map[string]time.Time, error) {
	out := map[string]time.Time{}
	err := f.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketBlocked).ForEach(func(k, v []byte) error {
			s, err := decodeSetBlocked(v)
			if err != nil {
				return err
			}
			out[string(k)] = s.At
			return nil
		})
	})
	return out, err
}

// IsFirstKey reports whether entry is a CreateKey of the first admin key.
func IsFirstKey(entry []byte) bool {
	if len(entry) == 0 || CommandType(entry[0]) != TypeCreateKey {
		return false
	}
	c, err := decodeCreateKey(entry[1:])
	return err == nil && c.First
}
