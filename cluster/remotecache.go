package cluster

import (
	"time"

	"github.com/maypok86/otter/v2"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/link"
)

// remoteCache holds links of shards this node does not host, for at most
// Config.RemoteCacheTTL, evicted early by the gossip invalidations a
// shard's replicas send when a link changes.
type remoteCache struct {
	c *otter.Cache[string, remoteEntry]
}

// remoteEntry is a cached link of a shard not hosted here, or (l == nil) a
// marker that the code changed at Raft index minVersion, so an older answer
// still in flight must not be cached.
type remoteEntry struct {
	l          *link.Link
	minVersion uint64
}

func newRemoteCache(ttl time.Duration) (*remoteCache, error) {
	c, err := otter.New(&otter.Options[string, remoteEntry]{
		MaximumSize:      100_000,
		ExpiryCalculator: otter.ExpiryWriting[string, remoteEntry](ttl),
	})
	if err != nil {
		return nil, err
	}
	return &remoteCache{c: c}, nil
}

// changed runs after a shard applies a change on this node: a link of a
// shard this node now hosts must not linger in the remote cache.
func (c *remoteCache) changed(_ command.ShardID, l *link.Link) {
	if faultNoInvalidate() {
		return
	}
	c.c.Invalidate(l.Code)
}

// announce tells the nodes without a replica to forget an updated or
// deleted code. The node that made the change sends it, once the change is
// applied on the leader (a create needs none: nobody can have cached a code
// before it existed, and codes are never reused). Best effort: the remote
// cache's TTL bounds what a lost message costs.
func (c *remoteCache) announce(g *gossip, l *link.Link) {
	if l == nil || faultNoInvalidate() {
		return
	}
	c.invalidate(l.Code, l.Version) // gossip does not deliver to its sender
	if g != nil {
		g.invalidate(l.Code, l.Version)
	}
}

// invalidate handles an invalidation: code changed at Raft index version.
func (c *remoteCache) invalidate(code string, version uint64) {
	c.c.Compute(code, func(old remoteEntry, found bool) (remoteEntry, otter.ComputeOp) {
		return remoteEntry{minVersion: max(old.minVersion, version)}, otter.WriteOp
	})
}

// get returns a cached link of a shard not hosted here.
func (c *remoteCache) get(code string) (*link.Link, bool) {
	e, ok := c.c.GetIfPresent(code)
	if !ok || e.l == nil {
		return nil, false
	}
	return e.l, true
}

// remember caches l unless the cache knows of a newer version.
func (c *remoteCache) remember(l *link.Link) {
	c.c.Compute(l.Code, func(old remoteEntry, found bool) (remoteEntry, otter.ComputeOp) {
		if found && (old.minVersion > l.Version || old.l != nil && old.l.Version >= l.Version) {
			return old, otter.CancelOp
		}
		return remoteEntry{l: l}, otter.WriteOp
	})
}
