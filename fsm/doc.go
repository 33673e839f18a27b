// Package fsm holds linkraft's Raft state machines over bbolt: the shard FSM
// (links and their clicks) and the meta FSM (cluster settings, the ID
// allocator, placement, members, API keys and the blocklist).
//
// The entries they apply are package command's: the registry decodes and
// validates each, and each type has exactly one apply function here. Apply
// never reads the local clock (commands carry the proposer's).
//
// State lives in a bbolt file per FSM. The last applied Raft index is written
// in the same transaction as the data it covers, so after a restart Raft's
// replay of entries at or below it is skipped (raft.Config
// NoSnapshotRestoreOnStart), and a batch of entries (raft.BatchingFSM) costs one
// bbolt transaction and one fsync. An entry that fails the registry is
// answered with a *Rejection on every replica alike, changing nothing; one of
// a type this version does not know halts the group on this node until an
// upgrade. Business failures (link.ErrAliasTaken, link.ErrNotFound) are
// returned as values in Result.
//
// Snapshots are a bbolt read transaction streamed with WriteTo; Restore writes
// the stream to a temporary file, fsyncs it and swaps it in.
package fsm
