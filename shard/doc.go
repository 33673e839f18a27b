// Package shard is the link shard: a raftgroup.Group whose state machine is
// fsm.ShardFSM, with a cache in front of its bbolt file.
//
// Shard is a link shard: a raftgroup.Group whose FSM is fsm.ShardFSM, plus a W-TinyLFU
// cache (otter) in front of the bbolt file. Apply keeps the cache current:
// every committed change is written into it with its Raft index, and a
// reader that loaded an older state cannot overwrite a newer entry. Unknown
// codes are cached briefly (NegativeTTL) so a flood of random codes does not
// become a flood of bbolt reads.
package shard
