//go:build !linkraft_level6

package cluster

// FeatureLevel is what this version can apply. 1: the member registry
// (implied by an incarnation). 2: API keys and the blocklist. 3: a link's
// forward_query: false (DropQuery), title and description, and listings.
// 4: a link's password and redirect rules (a level-3 node would skip
// them, and redirect without asking for the password or without the
// rules), and Idempotency-Key claims (an entry it cannot apply). 5: the
// registry records each node's level (AdmitNode), and passwords and rules
// wait for every registered node, not only the live ones; listings by
// clicks. 6: a link's note (command.LevelLinkNote), and backup and
// restore (the peer operations dump and read-index, RestoreLinks entries).
// 7: replica moves and drains (a placement's Moves and Draining, which an
// older meta replica would drop; the peer operation applied). 8: the
// node's Raft log shared by its groups (raftgroup/nodelog); a data dir
// holds it only while the node runs at 8 or above (cluster/logs.go).
const FeatureLevel = 8
