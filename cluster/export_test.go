package cluster

import (
	"context"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/link"
	"github.com/linkraft/linkraft/meta"
	"github.com/linkraft/linkraft/peer"
	"github.com/linkraft/linkraft/shard"
)

// Hooks for the external tests (package cluster_test): what they look at
// inside a node. They exist in test builds only.

// LocalShard returns shard s if the node hosts it.
func (n *Node) LocalShard(s command.ShardID) *shard.Shard { return n.host.local(s) }

// LocalShards returns the shards the node hosts.
func (n *Node) LocalShards() []*shard.Shard { return n.host.localShards() }

// Locate returns code's shard.
func (n *Node) Locate(code string) command.ShardID { return n.host.locate(code) }

// LocalFocus returns the shards the node's generated codes go to now
// (nil: no focus, locality.go) and a token that changes with each
// measurement of them.
func (n *Node) LocalFocus() (focus []bool, token any) {
	p := n.locality.pref.Load()
	if p == nil {
		return nil, nil
	}
	return p.focus, p
}

// Meta returns the node's replica of the meta group.
func (n *Node) Meta() *meta.Meta { return n.meta }

// Peers returns the node's client of the peer protocol.
func (n *Node) Peers() *peer.Client { return n.peers }

// ClusterAt reports whether every live member runs at least level.
func (n *Node) ClusterAt(level int) bool { return n.clusterAt(level) }

// Supports reports whether the cluster may take what needs level.
func (n *Node) Supports(level int) error { return n.supports(level) }

// ApplyCreate proposes cmd as a create would.
func (n *Node) ApplyCreate(ctx context.Context, cmd *command.CreateIfAbsent) (*link.Link, error) {
	return n.links.applyCreate(ctx, cmd)
}

// RetryUnknown proposes cmd on group's leader until its outcome is known.
func (n *Node) RetryUnknown(ctx context.Context, group command.GroupID, cmd []byte) (*peer.ApplyResponse, error) {
	return n.router.retryUnknown(ctx, group, cmd)
}

// LeaderHint is the node's leader hint for group.
func (n *Node) LeaderHint(group command.GroupID) string { return n.router.hints.get(group) }

// SetLeaderHint sets it.
func (n *Node) SetLeaderHint(group command.GroupID, addr string) { n.router.hints.set(group, addr) }

// RememberLeader keeps addr as group's hint if it is a replica's.
func (n *Node) RememberLeader(group command.GroupID, addr string) {
	n.router.rememberLeader(group, addr)
}

// GossipMembers returns the members gossip shows.
func (n *Node) GossipMembers() []Member { return n.gossip.members() }

// FullNodes returns the live nodes whose storage alarm is on.
func (n *Node) FullNodes() map[string]bool { return n.gossip.fullNodes() }

// CachedRemote returns a link of the remote cache.
func (n *Node) CachedRemote(code string) (*link.Link, bool) { return n.remote.get(code) }

// Refusal returns why the cluster refused this node, or "".
func (n *Node) Refusal() string { return n.admission.refusal() }

// Incarnation returns the ID of the node's data dir.
func (n *Node) Incarnation() string { return n.incarnation }

// DataDir returns the node's data dir.
func (n *Node) DataDir() string { return n.cfg.DataDir }

// VerifyPeer is the peer-port handshake's check of id's incarnation.
func (n *Node) VerifyPeer(id, inc string) error { return n.admission.verifyPeer(id, inc) }

// Config returns the node's configuration, defaults filled in.
func (n *Node) Config() Config { return n.cfg }

// SubmitClicks proposes a click batch through shard s's group.
func (n *Node) SubmitClicks(ctx context.Context, s command.ShardID, b *command.ClickBatch) error {
	return n.clicks.submit(ctx, s, b)
}

// After reports whether a comes after b in q's order.
func After(a, b link.ListPosition, q link.ListQuery) bool { return after(a, b, q) }
