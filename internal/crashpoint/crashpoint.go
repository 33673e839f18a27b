// Package crashpoint names the places in linknode's write path where the
// chaos harness can crash a node on purpose: between the Raft log's fsync
// and the state file's commit, with a batch applied and answered but not
// committed, right after a commit, in the middle of a snapshot and of a
// snapshot's install. A kill from outside lands wherever the process
// happens to be; a crash point lands exactly there, so the recovery of
// each of those states is shown, not hoped for.
//
// The points exist only in binaries built with -tags jepsencrash (the
// harness builds one when its run has the crash-point fault); in every
// other build Hit is an empty function the compiler removes. In a
// jepsencrash build, Listen makes SIGUSR2 read the file named by
// $LINKRAFT_CRASH_ARM: the point named there is armed (an empty file
// disarms). The first Hit of the armed point writes one line to stderr and
// SIGKILLs the process. Never ship a jepsencrash build.
package crashpoint

// Env names the environment variable holding the path of the arming file.
const Env = "LINKRAFT_CRASH_ARM"

// The crash points.
const (
	// LogStored: entries are fsynced in a group's Raft log and not yet
	// applied to its state (raftgroup's log store, after StoreLogs).
	LogStored = "log-stored"
	// StatePending: a batch is applied to the state file's open
	// transaction and answered (the create acknowledged), not committed:
	// a restart must apply it again from the log (fsm).
	StatePending = "state-pending"
	// StateCommitted: the state file's transaction has just committed,
	// before anything else learns of it (fsm).
	StateCommitted = "state-committed"
	// SnapshotPersist: a snapshot's marker is written into raft's
	// snapshot sink, which is not closed: a snapshot half taken (fsm).
	SnapshotPersist = "snapshot-persist"
	// RestoreSwap: a received state file has replaced the state file and
	// is not opened yet: a snapshot install half done (fsm). Reached only
	// when a leader sends a snapshot.
	RestoreSwap = "restore-swap"
)

// Points lists every crash point.
var Points = []string{LogStored, StatePending, StateCommitted, SnapshotPersist, RestoreSwap}
