package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/link"
	"github.com/linkraft/linkraft/meta"
)

// Keys is the node's role for API keys and the blocklist: reads come from
// this node's replica of the meta group (package meta), writes go through
// the meta leader and are waited for here, so that a key made through a
// node works on it when the call returns.
type Keys struct{ n *Node }

// Authenticate returns the key whose secret this is;
// apikey.ErrUnauthorized if there is none.
func (k *Keys) Authenticate(secret string) (apikey.Key, error) { return k.n.meta.Authenticate(secret) }

// Key returns the key with id; apikey.ErrNotFound if there is none (the
// web UI's sessions name their key by ID).
func (k *Keys) Key(id string) (apikey.Key, error) { return k.n.meta.KeyByID(id) }

// List lists the cluster's keys (no secrets: none are stored).
func (k *Keys) List() ([]apikey.Key, error) { return k.n.meta.ListKeys() }

// Create makes a key through the meta group and returns its secret,
// which is not stored anywhere: the caller shows it once.
func (k *Keys) Create(ctx context.Context, req apikey.Request) (string, apikey.Key, error) {
	n := k.n
	if !n.clusterAt(levelKeys) {
		return "", apikey.Key{}, link.ErrUpgradeNeeded
	}
	secret, err := apikey.NewSecret()
	if err != nil {
		return "", apikey.Key{}, err
	}
	id, err := apikey.NewID()
	if err != nil {
		return "", apikey.Key{}, err
	}
	key := apikey.Key{ID: id, Name: req.Name, Owner: req.Owner, Scopes: req.Scopes, RateLimit: req.RateLimit,
		CreatedAt: time.Now().UTC().Truncate(time.Millisecond), Hash: apikey.HashOf(secret)}
	ctx, cancel := withDefaultTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := n.router.apply(ctx, command.MetaGroup, (&command.CreateKey{Key: key}).Encode(), 0); err != nil {
		return "", apikey.Key{}, err
	}
	n.log.Info("api key created", "key_id", key.ID, "name", key.Name, "owner", key.Owner, "scopes", key.Scopes.String())
	// Read your writes: the key works on this node when the call returns.
	n.meta.WaitKeys(ctx, func(s *meta.Keys) bool { _, ok := s.ByHash(key.Hash); return ok })
	return secret, key, nil
}

// Revoke deletes a key; every node refuses it once it applies the
// revocation (within milliseconds on a healthy cluster).
func (k *Keys) Revoke(ctx context.Context, id string) error {
	n := k.n
	if !apikey.ValidID(id) {
		return apikey.ErrNotFound
	}
	if !n.clusterAt(levelKeys) {
		return link.ErrUpgradeNeeded
	}
	ctx, cancel := withDefaultTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := n.router.apply(ctx, command.MetaGroup, (&command.RevokeKey{ID: id, At: time.Now().UTC()}).Encode(), 0); err != nil {
		return err
	}
	n.log.Info("api key revoked", "key_id", id)
	n.meta.WaitKeys(ctx, func(s *meta.Keys) bool { return !s.HasID(id) })
	return nil
}

// SetBlocked adds a destination domain (and its subdomains) to the
// cluster's blocklist, or removes it.
func (k *Keys) SetBlocked(ctx context.Context, domain string, blocked bool) error {
	n := k.n
	if !n.clusterAt(levelKeys) {
		return link.ErrUpgradeNeeded
	}
	ctx, cancel := withDefaultTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := n.router.apply(ctx, command.MetaGroup, (&command.SetBlocked{Domain: domain, Blocked: blocked, At: time.Now().UTC()}).Encode(), 0)
	if err != nil {
		return err
	}
	n.log.Info("blocklist changed", "domain", domain, "blocked", blocked)
	n.meta.WaitKeys(ctx, func(s *meta.Keys) bool { _, ok := s.Blocked()[domain]; return ok == blocked })
	return nil
}

// Blocklist returns the blocked domains with when each was added.
func (k *Keys) Blocklist() (map[string]time.Time, error) {
	s, err := k.n.meta.Keys()
	if err != nil {
		return nil, err
	}
	return s.Blocked(), nil
}

// Blocked reports whether host or a domain it is under is on the cluster's
// blocklist (as this node's replica has it).
func (k *Keys) Blocked(host string) bool { return k.n.meta.Blocked(host) }

// BlockedURL reports whether a stored destination's host is blocked.
func (k *Keys) BlockedURL(u string) bool { return k.n.meta.BlockedURL(u) }

// ensureFirstKey makes the cluster's first admin key, once (meta leader
// only, after the settings): the operator's (Config.AdminKey) or a new one,
// written to Config.AdminKeyFile before it is proposed, so that a key that
// commits is never lost with a crash.
func (k *Keys) ensureFirstKey(ctx context.Context) error {
	n := k.n
	made, err := n.meta.FirstKeyMade()
	if err != nil || made || !n.clusterAt(levelKeys) {
		return err
	}
	secret, file := n.cfg.AdminKey, ""
	if secret == "" {
		file = n.cfg.AdminKeyFile
		if file == "" {
			file = filepath.Join(n.cfg.DataDir, "admin.key")
		}
		secret, err = apikey.LoadSecret(file)
		if errors.Is(err, os.ErrNotExist) {
			if secret, err = apikey.NewSecret(); err == nil {
				err = apikey.SaveSecret(file, secret)
			}
		}
		if err != nil {
			return fmt.Errorf("first admin key: %w", err)
		}
	}
	id, err := apikey.NewID()
	if err != nil {
		return err
	}
	key := apikey.Key{ID: id, Name: "first-admin-key", Owner: apikey.OwnerAdmin, Scopes: apikey.Admin,
		CreatedAt: time.Now().UTC().Truncate(time.Millisecond), Hash: apikey.HashOf(secret)}
	out, _, err := n.meta.Group().Apply(ctx, (&command.CreateKey{Key: key, First: true}).Encode())
	if err != nil {
		return err
	}
	r, ok := out.(*command.KeyResult)
	if !ok {
		return fmt.Errorf("first admin key: unexpected response %T", out)
	}
	if errors.Is(r.Err, command.ErrFirstKeyMade) {
		// Another leader made it (or this one did, in an attempt whose
		// outcome it never learnt): the file stays only if it holds a
		// key of the cluster.
		if _, err := n.meta.Authenticate(secret); err != nil && file != "" {
			_ = os.Remove(file)
		}
		return nil
	}
	if r.Err != nil {
		return r.Err
	}
	if file != "" {
		n.log.Info("made the first admin API key; it is in the file, and nowhere in the logs", "file", file, "key_id", key.ID)
	} else {
		n.log.Info("installed the first admin API key given to this node", "key_id", key.ID)
	}
	return nil
}
