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

func appendKey(b []byte, k *apikey.Key) []byte {
	b = appendString(b, fKeyID, k.ID)
	b = appendString(b, fKeyName, k.Name)
	b = appendString(b, fKeyOwner, k.Owner)
	b = appendUint(b, fKeyScopes, uint64(k.Scopes))
	b = appendUint(b, fKeyRate, uint64(k.RateLimit))
	b = appendTime(b, fKeyCreated, k.CreatedAt)
	return appendBytes(b, fKeyHash, k.Hash[:])
}

// Encode returns the Raft entry for c.
func (c *CreateKey) Encode() []byte {
	b := appendKey([]byte{byte(TypeCreateKey)}, &c.Key)
	return appendBool(b, fKeyFirst, c.First)
}

func decodeCreateKey(body []byte) (*CreateKey, error) {
	c := &CreateKey{}
	fr := fieldReader{b: body}
	if err := fr.each(func(num protowire.Number, typ protowire.Type) {
		switch num {
		case fKeyID:
			c.Key.ID = fr.str(typ, num)
		case fKeyName:
			c.Key.Name = fr.str(typ, num)
		case fKeyOwner:
			c.Key.Owner = fr.str(typ, num)
		case fKeyScopes:
			c.Key.Scopes = apikey.Scope(fr.uint(typ, num))
		case fKeyRate:
			c.Key.RateLimit = uint32(min(fr.uint(typ, num), 1<<32-1))
		case fKeyCreated:
			c.Key.CreatedAt = fr.time(typ, num)
		case fKeyHash:
			h := fr.bytes(typ, num)
			if fr.err == nil && len(h) != len(c.Key.Hash) {
				fr.setErr(invalid("key hash of %d bytes", len(h)))
			}
			copy(c.Key.Hash[:], h)
		case fKeyFirst:
			c.First = fr.uint(typ, num) != 0
		default:
			fr.skip(num, typ)
		}
	}); err != nil {
		return nil, err
	}
	return c, nil
}

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

// Encode returns the Raft entry for r.
func (r *RevokeKey) Encode() []byte {
	b := appendString([]byte{byte(TypeRevokeKey)}, fRevokeID, r.ID)
	return appendTime(b, fRevokeAt, r.At)
}

func decodeRevokeKey(body []byte) (*RevokeKey, error) {
	r := &RevokeKey{}
	fr := fieldReader{b: body}
	if err := fr.each(func(num protowire.Number, typ protowire.Type) {
		switch num {
		case fRevokeID:
			r.ID = fr.str(typ, num)
		case fRevokeAt:
			r.At = fr.time(typ, num)
		default:
			fr.skip(num, typ)
		}
	}); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *RevokeKey) validate() error {
	if !apikey.ValidID(r.ID) {
		return invalid("key id %q", truncate(r.ID))
	}
	return nil
}

// Encode returns the Raft entry for s.
func (s *SetBlocked) Encode() []byte {
	b := appendString([]byte{byte(TypeSetBlocked)}, fBlockDomain, s.Domain)
	b = appendBool(b, fBlockOn, s.Blocked)
	return appendTime(b, fBlockAt, s.At)
}

func decodeSetBlocked(body []byte) (*SetBlocked, error) {
	s := &SetBlocked{}
	fr := fieldReader{b: body}
	if err := fr.each(func(num protowire.Number, typ protowire.Type) {
		switch num {
		case fBlockDomain:
			s.Domain = fr.str(typ, num)
		case fBlockOn:
			s.Blocked = fr.uint(typ, num) != 0
		case fBlockAt:
			s.At = fr.time(typ, num)
		default:
			fr.skip(num, typ)
		}
	}); err != nil {
		return nil, err
	}
	return s, nil
}

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
	if err := b.Put([]byte(c.Key.ID), appendKey(nil, &c.Key)); err != nil {
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
