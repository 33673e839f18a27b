// Package status holds what a node reports about itself and its cluster:
// the types of the admin API's answers (GET /admin/v1/cluster, leases,
// digests) and of readiness. The node (package cluster) fills them in;
// the HTTP layer writes them as they are. It imports nothing of the
// project, so both may import it.
package status

import (
	"errors"
	"time"
)

// ErrNotReady is wrapped by a node's readiness error.
var ErrNotReady = errors.New("not ready")

// ErrUnknownNode is returned for a node ID that is not a member.
var ErrUnknownNode = errors.New("unknown node")

// ErrCannotDrain is returned for a drain that would leave shards without
// a node to move their replicas to.
var ErrCannotDrain = errors.New("cannot drain the node")

// Cluster is the cluster as one node sees it (GET /admin/v1/cluster).
type Cluster struct {
	NodeID    string  `json:"node_id"`
	ClusterID string  `json:"cluster_id"`
	CodeMode  string  `json:"code_mode"`
	Nodes     []Node  `json:"nodes"`
	Meta      Group   `json:"meta"`
	Shards    []Group `json:"shards"`
	Storage   Storage `json:"storage"`
	// FeatureLevel is this node's feature level; ClusterLevel the one the
	// whole cluster runs at (what needs more waits for an upgrade).
	FeatureLevel int `json:"feature_level"`
	ClusterLevel int `json:"cluster_level"`
}

// Node describes one member of the cluster.
type Node struct {
	ID         string `json:"id"`
	HTTPAddr   string `json:"http_addr"`
	RaftAddr   string `json:"raft_addr"`
	GossipAddr string `json:"gossip_addr"`
	// Status is "alive", "failed" (gossip lost it) or "unknown" (a
	// member of the meta group that gossip has not shown).
	Status string `json:"status"`
	// Replicas counts the shard replicas the placement puts on the node.
	Replicas int `json:"replicas"`
	// Draining is set while an operator drains the node.
	Draining bool `json:"draining,omitempty"`
	// Level is the feature level the node gossips (0: not known).
	Level int `json:"feature_level,omitempty"`
}

// Group describes one Raft group as one node sees it.
type Group struct {
	ID       string   `json:"id"`
	Leader   string   `json:"leader"`
	Replicas []string `json:"replicas"`
	// Nonvoters are the replicas still catching up (a replica moving
	// here votes once it has).
	Nonvoters    []string `json:"nonvoters,omitempty"`
	State        string   `json:"state"`
	Term         uint64   `json:"term"`
	AppliedIndex uint64   `json:"applied_index"`
	CommitIndex  uint64   `json:"commit_index"`
	LastContact  string   `json:"last_contact"`
	Links        *int     `json:"links,omitempty"`
	LastIndex    uint64   `json:"last_index"`
	// Rejected counts committed entries this replica rejected (bad input
	// that got past a leader's checks) since it started.
	Rejected uint64 `json:"rejected_entries"`
	// Halted is set when this replica stopped applying: it met a command
	// type its version does not know (upgrade it), or state it cannot
	// read (repair it).
	Halted *Halt `json:"halted,omitempty"`
	// Stalled is set while a commit keeps failing (a full disk).
	Stalled *Stall `json:"stalled,omitempty"`
}

// Halt says where and why a group stopped applying on a node.
type Halt struct {
	Index  uint64 `json:"index"`
	Type   uint8  `json:"type"`
	Reason string `json:"reason"`
}

// Stall is a commit that keeps failing (ENOSPC, EIO) and is being retried.
type Stall struct {
	// Index is the last index of the batch.
	Index    uint64    `json:"index"`
	Err      string    `json:"error"`
	Since    time.Time `json:"since"`
	Attempts int       `json:"attempts"`
}

// Health is what a group's state machine says of its apply loop.
type Health struct {
	Rejected uint64
	Halted   *Halt
	Stalled  *Stall
}

// Storage is a node's last storage measurement. UsedBytes is the link
// data in the data dir (Raft logs, snapshots, state files), bbolt free
// pages not counted.
type Storage struct {
	UsedBytes  int64 `json:"used_bytes"`
	FreeBytes  int64 `json:"free_bytes"`
	QuotaBytes int64 `json:"quota_bytes"`
	MinFree    int64 `json:"min_free_bytes"`
	// VisitBytes is the raw visit file's live bytes, not counted in
	// UsedBytes: it has its own budget, VisitMaxBytes (-1: none), past
	// which raw visits are shed (VisitsShed since the node started).
	VisitBytes    int64     `json:"visit_bytes"`
	VisitMaxBytes int64     `json:"visit_max_bytes"`
	VisitsShed    uint64    `json:"visits_shed"`
	Alarm         bool      `json:"alarm"`
	Reason        string    `json:"reason,omitempty"`
	CheckedAt     time.Time `json:"checked_at"`
}

// Lease is one ID range the meta group granted: IDs [Start, End) to Node,
// by the entry at Index (0 for grants recorded before indexes were kept).
type Lease struct {
	Index uint64 `json:"index,omitempty"`
	Start uint64 `json:"start"`
	End   uint64 `json:"end"`
	Node  string `json:"node"`
}

// Digest sums up one replica's state as of one applied index: replicas of
// a group at the same index must agree (GET /admin/v1/digest).
type Digest struct {
	// Group is "meta" or the shard id.
	Group string `json:"group"`
	// AppliedIndex is the last Raft index the state includes.
	AppliedIndex uint64 `json:"applied_index"`
	// Items counts what was summed: links (tombstones included) for a
	// shard, lease grants for the meta group.
	Items int `json:"items"`
	// Sum is the hex SHA-256 of the items, in key order.
	Sum string `json:"digest"`
}
