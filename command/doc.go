// Package command defines linkraft's messages: the Raft commands of the
// shard and meta groups, the records the state machines keep (a record is
// the message that made it, less what its key says) and the bodies peers
// send each other (a link, click stats), with their codec and the registry
// of command types.
//
// Every Raft entry is a command: one type byte (Type) followed by a
// protowire body (package internal/wire). Types are append-only and never
// reused; type 0 is reserved, and a type with the high bit set
// (IgnoreUnknownFlag) may be skipped by an older binary that does not know
// it. Commands carry everything apply needs, including the proposer's
// clock, so every replica computes the same state.
//
// The registry (Lookup, Check) gives each type its group kind, decoder and
// apply-time validation; package fsm applies what it returns. The bytes of
// every form are pinned by testdata/encodings.golden: the Raft log and the
// bbolt files outlive any version of this code.
package command
