package meta

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/link"
)

// The keys and the blocklist are answered from this node's replica through
// a cache that reloads when the FSM's KeysVersion moves: a revoked key
// stops working on a node as soon as that node applies the revocation.

// Keys is the keys and the blocklist as of one version of the replica.
type Keys struct {
	version uint64
	byHash  map[apikey.Hash]apikey.Key
	byID    map[string]apikey.Key
	blocked map[string]time.Time
}

// ByHash returns the key whose secret hashes to h.
func (k *Keys) ByHash(h apikey.Hash) (apikey.Key, bool) {
	key, ok := k.byHash[h]
	return key, ok
}

// HasID reports whether a key has id.
func (k *Keys) HasID(id string) bool {
	_, ok := k.byID[id]
	return ok
}

// ByID returns the key with id.
func (k *Keys) ByID(id string) (apikey.Key, bool) {
	key, ok := k.byID[id]
	return key, ok
}

// Blocked returns the blocklist with when each domain was added.
func (k *Keys) Blocked() map[string]time.Time { return k.blocked }

// keyCache holds the last Keys read.
type keyCache struct {
	fsm  *fsm.MetaFSM
	mu   sync.Mutex // serialises reloads
	snap atomic.Pointer[Keys]
}

// Keys returns the keys and the blocklist as this replica has them now.
func (m *Meta) Keys() (*Keys, error) {
	c := &m.keys
	v := c.fsm.KeysVersion()
	if s := c.snap.Load(); s != nil && s.version == v {
		return s, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// The version is read before the state: a change committed meanwhile
	// makes the next call reload again.
	v = c.fsm.KeysVersion()
	if s := c.snap.Load(); s != nil && s.version == v {
		return s, nil
	}
	keys, err := c.fsm.Keys()
	if err != nil {
		return nil, err
	}
	blocked, err := c.fsm.BlockedDomains()
	if err != nil {
		return nil, err
	}
	s := &Keys{version: v, byHash: make(map[apikey.Hash]apikey.Key, len(keys)), byID: make(map[string]apikey.Key, len(keys)), blocked: blocked}
	for _, k := range keys {
		s.byHash[k.Hash] = k
		s.byID[k.ID] = k
	}
	c.snap.Store(s)
	return s, nil
}

// ListKeys lists the cluster's keys (no secrets: none are stored).
func (m *Meta) ListKeys() ([]apikey.Key, error) { return m.fsm.Keys() }

// FirstKeyMade reports whether a key was ever made in this cluster.
func (m *Meta) FirstKeyMade() (bool, error) { return m.fsm.FirstKeyMade() }

// Authenticate returns the key whose secret this is; apikey.ErrUnauthorized
// if there is none.
func (m *Meta) Authenticate(secret string) (apikey.Key, error) {
	s, err := m.Keys()
	if err != nil {
		return apikey.Key{}, err
	}
	if k, ok := s.ByHash(apikey.HashOf(secret)); ok {
		return k, nil
	}
	return apikey.Key{}, apikey.ErrUnauthorized
}

// KeyByID returns the key with id; apikey.ErrNotFound if there is none
// (never made, or revoked).
func (m *Meta) KeyByID(id string) (apikey.Key, error) {
	s, err := m.Keys()
	if err != nil {
		return apikey.Key{}, err
	}
	if k, ok := s.ByID(id); ok {
		return k, nil
	}
	return apikey.Key{}, apikey.ErrNotFound
}

// WaitKeys waits (until ctx ends) for this replica to show a committed key
// or blocklist change, so that the node that took the request answers as
// the cluster now is.
func (m *Meta) WaitKeys(ctx context.Context, done func(*Keys) bool) {
	for {
		if s, err := m.Keys(); err != nil || done(s) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// Blocked reports whether host or a domain it is under is on the
// blocklist.
func (m *Meta) Blocked(host string) bool {
	s, err := m.Keys()
	return err == nil && link.InDomains(s.blocked, host)
}

// BlockedURL reports whether a stored destination's host is blocked (the
// redirect path asks it for every link: without a blocklist it costs one
// atomic load and a version check).
func (m *Meta) BlockedURL(u string) bool {
	s, err := m.Keys()
	if err != nil || len(s.blocked) == 0 {
		return false
	}
	return link.InDomains(s.blocked, hostOf(u))
}

// hostOf is the host of a stored (normalised) URL: between "://" and the
// first of / ? #, without a port or brackets.
func hostOf(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		u = u[i+3:]
	}
	if i := strings.IndexAny(u, "/?#"); i >= 0 {
		u = u[:i]
	}
	if strings.HasPrefix(u, "[") {
		if i := strings.IndexByte(u, ']'); i > 0 {
			return u[1:i]
		}
	}
	if i := strings.LastIndexByte(u, ':'); i >= 0 {
		u = u[:i]
	}
	return u
}
