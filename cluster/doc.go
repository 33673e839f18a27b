// Package cluster is the node: the peer port and its multiplexer, gossip
// membership, the meta Raft group (cluster settings, placement, ID leases,
// the member registry, API keys and the blocklist), the shard groups the
// node hosts, and the routing of a code to its shard and of a write to its
// leader. The HTTP layer talks to a Node only.
//
// Every node holds a replica of the meta group (a voter or a non-voter), so
// settings, placement, keys and the blocklist are answered locally; links
// live in the shards placed on the node, and any node forwards what it does
// not host.
package cluster
