// Package raftgroup runs one hashicorp/raft group of a node: the meta group
// and every link shard are each a Group, over the node's single peer port.
// It owns the Raft configuration, the log, stable and snapshot stores, the
// read-consistency helpers (VerifyRead, ConfirmLeader's leader lease) and
// the membership API the cluster's leader loops use.
//
// Its Raft configuration, and why:
//
//   - Timers: hashicorp/raft's defaults (DefaultTiming: 1 s heartbeat and
//     election timeout, 500 ms leader lease, 50 ms commit timeout). Every
//     group runs its own heartbeats, so a node with N groups sends N times the
//     heartbeat traffic; the defaults keep that at 5–10 RPC/s per follower per
//     group. Tests use shorter timers.
//   - NoSnapshotRestoreOnStart: the FSM is a durable bbolt file that stores
//     its applied index in the same transaction as the data, so a restart
//     replays only the entries after it instead of rebuilding from a
//     snapshot.
//   - Snapshots are markers (fsm.LiveStateMarker): raft persists a few
//     bytes, and when it opens the snapshot to send it to a follower the
//     snapshot store (liveSnapshots) streams the FSM's live bbolt file
//     instead, which holds the snapshot's entries and maybe a few more (the
//     follower's FSM skips those on replay). A snapshot therefore costs no
//     copy of the state, on disk or in I/O, however many links a shard holds.
//   - DefaultSnapshots: a snapshot every 2,048 entries (checked every
//     10–20 s), 2,048 entries kept behind it, so the log stays small even
//     when bulk imports put ~1,000 links in an entry.
//   - Log and stable store: the node's shared log (package nodelog: one
//     bbolt file, a bucket per group, every group's pending appends and
//     votes committed together, one fsync for all), or below feature level
//     8 raft-boltdb/v2 (one raft.db per group); both with the hashmap
//     freelist and NoFreelistSync, never NoSync, behind a 512-entry
//     LogCache. File snapshot store keeping 1 snapshot.
//   - Transport: a raft.NetworkTransport per group (MaxPool 2, 10 s I/O
//     timeout) over the group's layer of the node's single peer port
//     (package transport), with pipelined replication turned off: it can
//     deadlock in raft v1.8.0 (see noPipeline).
//   - BatchingFSM: concurrent Apply calls are group-committed by raft, and a
//     batch of up to 64 committed entries is applied in one go. A link
//     shard's FSM applies batches to an open bbolt transaction and commits
//     it (one fsync) every second (fsm.DefaultCommitInterval), before a
//     snapshot and before a read that needs the file: etcd's backend. The
//     log already holds every entry durably, and a snapshot (after which
//     raft compacts the log) commits first, so a crash loses nothing
//     acknowledged: a restart applies the entries after the file's applied
//     index again. The meta FSM commits every batch.
package raftgroup
