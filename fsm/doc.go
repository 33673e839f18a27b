// Package fsm holds linkraft's Raft state machines over bbolt: the shard FSM
// (links) and the meta FSM (cluster settings and the ID allocator).
//
// Every Raft entry is a Command: one type byte followed by a protowire body.
// Types are append-only and never reused; type 0 is reserved, and a type with
// the high bit set (IgnoreUnknownFlag) may be skipped by an older binary that
// does not know it. Each type has exactly one apply function. Commands carry
// everything apply needs, including the proposer's clock, so every replica
// computes the same state; apply never reads the local clock.
//
// State lives in a bbolt file per FSM. The last applied Raft index is written
// in the same transaction as the data it covers, so after a restart Raft's
// replay of entries at or below it is skipped (raft.Config
// NoSnapshotRestoreOnStart), and a batch of entries (raft.BatchingFSM) costs one
// bbolt transaction and one fsync. An entry that cannot be decoded means the
// log is corrupt: apply panics rather than guess. Business failures
// (link.ErrAliasTaken, link.ErrNotFound) are returned as values in Result.
//
// Snapshots are a bbolt read transaction streamed with WriteTo; Restore writes
// the stream to a temporary file, fsyncs it and swaps it in.
package fsm
