// Package cluster is the node: the peer port and its multiplexer, the meta
// Raft group (cluster settings, the ID allocator), the shard groups the node
// hosts, and the routing of a code to its shard. The HTTP layer talks to a
// Node only.
//
// Today a node bootstraps and runs a cluster of one (bootstrap-expect 1): the
// same parts — every write through a Raft group, state in bbolt, codes from
// ranges leased through the meta group, all groups on one peer port — that
// the multi-node cluster is built from.
package cluster
