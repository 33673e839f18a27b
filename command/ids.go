package command

import "strconv"

// ShardID names a link shard: 0 ≤ id < the cluster's shard count. The
// ring maps a code to one.
type ShardID int

// GroupID names a Raft group on a node's peer port: the meta group is 0
// (MetaGroup) and shard s is s+1 (ShardID.Group). The two are distinct
// types so that a shard id passed where a group id is meant, or the
// reverse, does not compile.
type GroupID uint64

// MetaGroup is the meta group's id.
const MetaGroup GroupID = 0

// Group returns the id of shard s's Raft group.
func (s ShardID) Group() GroupID { return GroupID(s) + 1 }

// String is the shard id in decimal.
func (s ShardID) String() string { return strconv.Itoa(int(s)) }

// Shard returns the shard whose group g is, or false for the meta group.
func (g GroupID) Shard() (ShardID, bool) {
	if g == MetaGroup {
		return 0, false
	}
	return ShardID(g - 1), true
}

// Kind is the kind of group g is.
func (g GroupID) Kind() GroupKind {
	if g == MetaGroup {
		return GroupMeta
	}
	return GroupShard
}

// String names the group: "meta" or "shard-<id>".
func (g GroupID) String() string {
	if s, ok := g.Shard(); ok {
		return "shard-" + s.String()
	}
	return "meta"
}
