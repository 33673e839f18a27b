package fsm

import (
	"errors"
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

// Errors of key commands (in KeyResult.Err).
var (
	// ErrKeyExists answers a command.CreateKey whose ID or hash is taken.
	ErrKeyExists = errors.New("fsm: key exists")
	// ErrKeyNotFound answers a command.RevokeKey of an unknown ID.
	ErrKeyNotFound = errors.New("fsm: no such key")
	// ErrFirstKeyMade answers a command.CreateKey marked First once any key was
	// ever made: the first key is made once per cluster.
	ErrFirstKeyMade = errors.New("fsm: the first key was made before")
)

// KeyResult answers a command.CreateKey, command.RevokeKey or command.SetBlocked.
type KeyResult struct {
	Key *apikey.Key
	Err error
}

func (f *MetaFSM) applyCreateKey(tx *bolt.Tx, c *command.CreateKey) any {
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
	if err := b.Put([]byte(c.Key.ID), (&command.CreateKey{Key: c.Key}).AppendTo(nil)); err != nil {
		panic(fmt.Sprintf("fsm %s: put key: %v", f.path, err))
	}
	if err := settings.Put(keyFirstKey, []byte{1}); err != nil {
		panic(fmt.Sprintf("fsm %s: put first-key marker: %v", f.path, err))
	}
	f.keysChanged = true
	k := c.Key
	return &KeyResult{Key: &k}
}

func (f *MetaFSM) applyRevokeKey(tx *bolt.Tx, r *command.RevokeKey) any {
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

func (f *MetaFSM) applySetBlocked(tx *bolt.Tx, s *command.SetBlocked) any {
	b := tx.Bucket(bucketBlocked)
	var err error
	if s.Blocked {
		err = b.Put([]byte(s.Domain), (&command.SetBlocked{At: s.At}).AppendTo(nil))
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
