package cluster

import (
	"github.com/maypok86/otter/v2"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/link"
)

// The remote cache: links of shards this node does not host, kept for at
// most Config.RemoteCacheTTL and evicted early by the gossip invalidations
// a shard's replicas send when a link changes.

// changed runs after a shard applies a change on this node: a link of a
// shard this node now hosts must not linger in the remote cache.
func (n *Node) changed(_ command.ShardID, l *link.Link) {
	if faultNoInvalidate() {
		return
	}
	n.remote.Invalidate(l.Code)
}

// announceChange tells the nodes without a replica to forget an updated or
// deleted code. The node that made the change sends it, once the change is
// applied on the leader (a create needs none: nobody can have cached a code
// before it existed, and codes are never reused). Best effort: the remote
// cache's TTL bounds what a lost message costs.
func (n *Node) announceChange(l *link.Link) {
	if l == nil || faultNoInvalidate() {
		return
	}
	n.invalidateRemote(l.Code, l.Version) // gossip does not deliver to its sender
	if n.gossip != nil {
		n.gossip.invalidate(l.Code, l.Version)
	}
}

// remoteEntry is a cached link of a shard not hosted here, or (l == nil) a
// marker that the code changed at Raft index minVersion, so an older answer
// still in flight must not be cached.
type remoteEntry struct {
	l          *link.Link
	minVersion uint64
}

// invalidateRemote handles a gossiped invalidation.
func (n *Node) invalidateRemote(code string, version uint64) {
	n.remote.Compute(code, func(old remoteEntry, found bool) (remoteEntry, otter.ComputeOp) {
		return remoteEntry{minVersion: max(old.minVersion, version)}, otter.WriteOp
	})
}

// remoteCached returns a cached link of a shard not hosted here.
func (n *Node) remoteCached(code string) (*link.Link, bool) {
	e, ok := n.remote.GetIfPresent(code)
	if !ok || e.l == nil {
		return nil, false
	}
	return e.l, true
}

// rememberRemote caches l unless the cache knows of a newer version.
func (n *Node) rememberRemote(l *link.Link) {
	n.remote.Compute(l.Code, func(old remoteEntry, found bool) (remoteEntry, otter.ComputeOp) {
		if found && (old.minVersion > l.Version || old.l != nil && old.l.Version >= l.Version) {
			return old, otter.CancelOp
		}
		return remoteEntry{l: l}, otter.WriteOp
	})
}
