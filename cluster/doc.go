// Package cluster is the node: its peer port, gossip membership and
// formation, the meta group (package meta) and the link shards placed on
// it (package shard), and the routing of a code to its shard and of a
// command to its group's leader, here or over the peer protocol (package
// peer).
//
// The HTTP layer talks to a Node through its four roles: Links (create,
// read, update, delete, list), Keys (API keys and the blocklist), Admin
// (the cluster's status, readiness, operator actions) and Analytics
// (click statistics, raw visits, the click pipeline). Each is a small
// type of its own in a file of its own.
//
// Every node holds a replica of the meta group, so settings, placement,
// keys and the blocklist are answered locally; links live in the shards
// placed on the node, and any node forwards what it does not host.
//
// Files: node.go (lifecycle), config.go, route.go and lookup.go (the write
// and read paths), peers.go (the node's side of the peer protocol),
// host.go (the shards hosted here), leader.go (what leaders reconcile),
// formation.go, identity.go and gossip.go (membership), levels.go (rolling
// upgrades), storage.go (the storage alarm), remotecache.go, and one file
// per role.
package cluster
