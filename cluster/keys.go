package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/link"
)

// featureLevel is what this version can apply, carried in gossip: the meta
// leader proposes a command type only once every live member's level
// knows it, so that a rolling upgrade never halts an older node's meta
// group at an unknown entry, and a field only once every member stores
// it (an older replica would skip it and hold other state). 1: the member
// registry (implied by an incarnation). 2: API keys and the blocklist.
// 3: a link's forward_query: false (DropQuery), title and description,
// and the listing RPC (opList). 4: a link's password and redirect rules (a
// level-3 node would skip them, and redirect without asking for the
// password or without the rules), and Idempotency-Key claims (an entry it
// cannot apply). 5: the registry records each node's level (AdmitNode),
// and passwords and rules wait for every registered node, not only the
// live ones; listings by clicks.
const featureLevel = 5

// levelKeys is the feature level of keys and the blocklist.
const levelKeys = 2

// levelListing is the feature level of opList: an older node answers it
// with an error, so a listing waits for every node.
const levelListing = 3

// levelAdmit is the feature level of AdmitNode, which records a node's
// level in the registry.
const levelAdmit = 5

// levelListClicks is the feature level of a listing by clicks (an older
// node answers its part of one in creation order).
const levelListClicks = 5

// ErrUnauthorized is returned by Authenticate for a secret that is no key
// of the cluster (unknown, or revoked).
var ErrUnauthorized = errors.New("unauthorized")

// ErrKeyNotFound is returned by RevokeKey for an unknown key ID.
var ErrKeyNotFound = command.ErrKeyNotFound

// ErrUpgradeNeeded is returned by key and blocklist writes while some live
// node runs a version that cannot apply them.
var ErrUpgradeNeeded = fmt.Errorf("%w: a node of the cluster runs an older version; upgrade every node first", link.ErrUnavailable)

// supports returns nil if the cluster may take what needs level, else an
// error wrapping ErrUpgradeNeeded that says which node is behind. Every
// live member must gossip at least level. From command.LevelLinkAccess on (fields
// an older replica would drop, then serve the link without), that is not
// enough: a node that is down, or rolled back, misses from gossip and would
// come back to apply the entries with an older version. So every node of
// the meta registry and of the meta group that is not removed must also
// have been admitted at level or later (AdmitNode records the level it
// gossiped). A node that never comes back holds those fields back until
// the operator removes it.
func (n *Node) supports(level int) error {
	if !n.clusterAt(level) {
		return fmt.Errorf("%w (a live node gossips a feature level below %d)", ErrUpgradeNeeded, level)
	}
	if n.gossip == nil || level < command.LevelLinkAccess {
		return nil
	}
	id, at, err := n.behind(level)
	if err != nil {
		return fmt.Errorf("%w: %w", link.ErrUnavailable, err)
	}
	if id != "" {
		return fmt.Errorf("%w: node %s was last admitted at feature level %d, and this needs %d: start it on this version, or remove it (linknode remove %s) if it is gone for good",
			ErrUpgradeNeeded, id, at, level, id)
	}
	return nil
}

// behind returns a node of the registry or the meta group, not removed,
// whose recorded feature level is below level (0 if none was recorded),
// or "" if there is none.
func (n *Node) behind(level int) (string, int, error) {
	members, err := n.metaFSM.Members()
	if err != nil {
		return "", 0, err
	}
	servers, err := n.meta.Servers()
	if err != nil {
		return "", 0, err
	}
	p, err := n.metaFSM.Placement()
	if err != nil {
		return "", 0, err
	}
	removed := map[string]bool{}
	if p != nil {
		for _, id := range p.Removed {
			removed[id] = true
		}
	}
	levels := make(map[string]int, len(members)+len(servers))
	for _, s := range servers {
		levels[s.ID] = 0 // a member the registry does not know: older than it
	}
	for _, m := range members {
		levels[m.ID] = m.Level
	}
	ids := slices.Sorted(maps.Keys(levels))
	for _, id := range ids {
		if !removed[id] && levels[id] < level {
			return id, levels[id], nil
		}
	}
	return "", 0, nil
}

// LiveNodes is how many nodes of the cluster this node sees alive, itself
// included (1 before gossip starts).
func (n *Node) LiveNodes() int {
	if n.gossip == nil {
		return 1
	}
	return max(n.gossip.alive(), 1)
}

// clusterAt reports whether every live member runs at least level.
func (n *Node) clusterAt(level int) bool {
	if n.gossip == nil || level <= 0 {
		return true
	}
	for _, m := range n.gossip.members() {
		if m.Alive && m.Level < level {
			return false
		}
	}
	return true
}

// keySnapshot is the keys and the blocklist as of a meta FSM KeysVersion.
type keySnapshot struct {
	version uint64
	byHash  map[apikey.Hash]apikey.Key
	blocked map[string]time.Time
}

// keyCache answers key and blocklist lookups from the local meta replica,
// reloading when the FSM's KeysVersion moves: a revoked key stops working
// on a node as soon as that node applies the revocation.
type keyCache struct {
	mu   sync.Mutex // serialises reloads
	snap atomic.Pointer[keySnapshot]
}

func (n *Node) keys() (*keySnapshot, error) {
	v := n.metaFSM.KeysVersion()
	if s := n.keyCache.snap.Load(); s != nil && s.version == v {
		return s, nil
	}
	n.keyCache.mu.Lock()
	defer n.keyCache.mu.Unlock()
	// The version is read before the state: a change committed meanwhile
	// makes the next call reload again.
	v = n.metaFSM.KeysVersion()
	if s := n.keyCache.snap.Load(); s != nil && s.version == v {
		return s, nil
	}
	keys, err := n.metaFSM.Keys()
	if err != nil {
		return nil, err
	}
	blocked, err := n.metaFSM.BlockedDomains()
	if err != nil {
		return nil, err
	}
	s := &keySnapshot{version: v, byHash: make(map[apikey.Hash]apikey.Key, len(keys)), blocked: blocked}
	for _, k := range keys {
		s.byHash[k.Hash] = k
	}
	n.keyCache.snap.Store(s)
	return s, nil
}

// Authenticate returns the key whose secret this is, from this node's
// replica of the meta group; ErrUnauthorized if there is none.
func (n *Node) Authenticate(secret string) (apikey.Key, error) {
	s, err := n.keys()
	if err != nil {
		return apikey.Key{}, err
	}
	if k, ok := s.byHash[apikey.HashOf(secret)]; ok {
		return k, nil
	}
	return apikey.Key{}, ErrUnauthorized
}

// Keys lists the cluster's keys (no secrets: none are stored).
func (n *Node) Keys() ([]apikey.Key, error) { return n.metaFSM.Keys() }

// KeyRequest describes a key to make.
type KeyRequest struct {
	Name      string
	Owner     string
	Scopes    apikey.Scope
	RateLimit uint32
}

// CreateKey makes a key through the meta group and returns its secret,
// which is not stored anywhere: the caller shows it once.
func (n *Node) CreateKey(ctx context.Context, req KeyRequest) (string, apikey.Key, error) {
	if !n.clusterAt(levelKeys) {
		return "", apikey.Key{}, ErrUpgradeNeeded
	}
	secret, err := apikey.NewSecret()
	if err != nil {
		return "", apikey.Key{}, err
	}
	id, err := apikey.NewID()
	if err != nil {
		return "", apikey.Key{}, err
	}
	k := apikey.Key{ID: id, Name: req.Name, Owner: req.Owner, Scopes: req.Scopes, RateLimit: req.RateLimit,
		CreatedAt: time.Now().UTC().Truncate(time.Millisecond), Hash: apikey.HashOf(secret)}
	ctx, cancel := withDefaultTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := n.applyGroup(ctx, command.MetaGroup, (&command.CreateKey{Key: k}).Encode(), 0); err != nil {
		return "", apikey.Key{}, err
	}
	n.log.Info("api key created", "key_id", k.ID, "name", k.Name, "owner", k.Owner, "scopes", k.Scopes.String())
	// Read your writes: the key works on this node when the call returns.
	n.waitKeys(ctx, func(s *keySnapshot) bool { _, ok := s.byHash[k.Hash]; return ok })
	return secret, k, nil
}

// RevokeKey deletes a key; every node refuses it once it applies the
// revocation (within milliseconds on a healthy cluster).
func (n *Node) RevokeKey(ctx context.Context, id string) error {
	if !apikey.ValidID(id) {
		return ErrKeyNotFound
	}
	if !n.clusterAt(levelKeys) {
		return ErrUpgradeNeeded
	}
	ctx, cancel := withDefaultTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := n.applyGroup(ctx, command.MetaGroup, (&command.RevokeKey{ID: id, At: time.Now().UTC()}).Encode(), 0); err != nil {
		return err
	}
	n.log.Info("api key revoked", "key_id", id)
	n.waitKeys(ctx, func(s *keySnapshot) bool {
		for _, k := range s.byHash {
			if k.ID == id {
				return false
			}
		}
		return true
	})
	return nil
}

// SetBlocked adds a destination domain (and its subdomains) to the
// cluster's blocklist, or removes it.
func (n *Node) SetBlocked(ctx context.Context, domain string, blocked bool) error {
	if !n.clusterAt(levelKeys) {
		return ErrUpgradeNeeded
	}
	ctx, cancel := withDefaultTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := n.applyGroup(ctx, command.MetaGroup, (&command.SetBlocked{Domain: domain, Blocked: blocked, At: time.Now().UTC()}).Encode(), 0)
	if err != nil {
		return err
	}
	n.log.Info("blocklist changed", "domain", domain, "blocked", blocked)
	n.waitKeys(ctx, func(s *keySnapshot) bool { _, ok := s.blocked[domain]; return ok == blocked })
	return nil
}

// waitKeys waits (until ctx ends) for this node's replica of the meta
// group to show a committed key or blocklist change, so that the node that
// took the request answers as the cluster now is: a key made through it
// works on it at once. Other nodes follow within milliseconds.
func (n *Node) waitKeys(ctx context.Context, done func(*keySnapshot) bool) {
	for {
		if s, err := n.keys(); err != nil || done(s) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// Blocklist returns the blocked domains with when each was added.
func (n *Node) Blocklist() (map[string]time.Time, error) {
	s, err := n.keys()
	if err != nil {
		return nil, err
	}
	return s.blocked, nil
}

// Blocked reports whether host or a domain it is under is on the cluster's
// blocklist (as this node's replica has it).
func (n *Node) Blocked(host string) bool {
	s, err := n.keys()
	return err == nil && link.InDomains(s.blocked, host)
}

// ensureFirstKey makes the cluster's first admin key, once (meta leader
// only, after the settings): the operator's (Config.AdminKey) or a new one,
// written to Config.AdminKeyFile before it is proposed, so that a key that
// commits is never lost with a crash.
func (n *Node) ensureFirstKey(ctx context.Context) error {
	made, err := n.metaFSM.FirstKeyMade()
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
	k := apikey.Key{ID: id, Name: "first-admin-key", Owner: apikey.OwnerAdmin, Scopes: apikey.Admin,
		CreatedAt: time.Now().UTC().Truncate(time.Millisecond), Hash: apikey.HashOf(secret)}
	out, _, err := n.meta.Apply(ctx, (&command.CreateKey{Key: k, First: true}).Encode())
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
		if _, err := n.Authenticate(secret); err != nil && file != "" {
			_ = os.Remove(file)
		}
		return nil
	}
	if r.Err != nil {
		return r.Err
	}
	if file != "" {
		n.log.Info("made the first admin API key; it is in the file, and nowhere in the logs", "file", file, "key_id", k.ID)
	} else {
		n.log.Info("installed the first admin API key given to this node", "key_id", k.ID)
	}
	return nil
}

// BlockedURL reports whether a stored destination's host is blocked (the
// redirect path asks it for every link: without a blocklist it costs one
// atomic load and a version check).
func (n *Node) BlockedURL(u string) bool {
	s, err := n.keys()
	if err != nil || len(s.blocked) == 0 {
		return false
	}
	return n.Blocked(hostOf(u))
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
