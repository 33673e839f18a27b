package fsm

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/apikey"
)

// The meta group holds the cluster's API keys (their SHA-256 only, never a
// secret) and its blocklist of destination domains. Every node holds a
// replica of the meta group, so every node answers "whose key is this?" and
// "is this domain blocked?" from its own state; KeysVersion tells a cache
// when to reload.

var (
	bucketKeys    = []byte("apikeys")   // key id -> key record
	bucketBlocked = []byte("blocklist") // domain -> blocked at
	keyFirstKey   = []byte("first-key") // in settings: a key was ever made
)

func (f *MetaFSM) applyCreateKey(tx *bolt.Tx, c *command.CreateKey) (any, error) {
	settings := tx.Bucket(bucketSettings)
	if c.First && settings.Get(keyFirstKey) != nil {
		return &command.KeyResult{Err: command.ErrFirstKeyMade}, nil
	}
	b := tx.Bucket(bucketKeys)
	if b.Get([]byte(c.Key.ID)) != nil {
		return &command.KeyResult{Err: fmt.Errorf("%w: id %s", command.ErrKeyExists, c.Key.ID)}, nil
	}
	taken := false
	_ = b.ForEach(func(_, v []byte) error {
		if k, err := decodeKeyRecord(v); err == nil && k.Hash == c.Key.Hash {
			taken = true
		}
		return nil
	})
	if taken {
		return &command.KeyResult{Err: fmt.Errorf("%w: that secret is in use", command.ErrKeyExists)}, nil
	}
	if err := b.Put([]byte(c.Key.ID), (&command.CreateKey{Key: c.Key}).AppendTo(nil)); err != nil {
		return nil, fmt.Errorf("put key: %w", err)
	}
	if err := settings.Put(keyFirstKey, []byte{1}); err != nil {
		return nil, fmt.Errorf("put first-key marker: %w", err)
	}
	f.keysChanged = true
	k := c.Key
	return &command.KeyResult{Key: &k}, nil
}

func (f *MetaFSM) applyRevokeKey(tx *bolt.Tx, r *command.RevokeKey) (any, error) {
	b := tx.Bucket(bucketKeys)
	v := b.Get([]byte(r.ID))
	if v == nil {
		return &command.KeyResult{Err: command.ErrKeyNotFound}, nil
	}
	k, _ := decodeKeyRecord(v)
	if err := b.Delete([]byte(r.ID)); err != nil {
		return nil, fmt.Errorf("delete key: %w", err)
	}
	f.keysChanged = true
	return &command.KeyResult{Key: k}, nil
}

func (f *MetaFSM) applySetBlocked(tx *bolt.Tx, s *command.SetBlocked) (any, error) {
	b := tx.Bucket(bucketBlocked)
	var err error
	if s.Blocked {
		err = b.Put([]byte(s.Domain), (&command.SetBlocked{At: s.At}).AppendTo(nil))
	} else {
		err = b.Delete([]byte(s.Domain))
	}
	if err != nil {
		return nil, fmt.Errorf("blocklist: %w", err)
	}
	f.keysChanged = true
	return &command.KeyResult{}, nil
}

func decodeKeyRecord(v []byte) (*apikey.Key, error) {
	var c command.CreateKey
	if err := c.Unmarshal(v); err != nil {
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
			var s command.SetBlocked
			if err := s.Unmarshal(v); err != nil {
				return err
			}
			out[string(k)] = s.At
			return nil
		})
	})
	return out, err
}
