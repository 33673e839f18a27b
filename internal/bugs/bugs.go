// Package bugs names the deliberate faults that the chaos harness's own
// tests switch on, to prove that each of its checkers can fail (a checker
// that cannot fail proves nothing). The faults exist only in binaries built
// with -tags jepsenbugs, and only when named in the LINKRAFT_JEPSEN_BUGS
// environment variable; in every other build On is a constant false and the
// code behind it compiles away. Never ship a jepsenbugs build.
//
// Each fault is caught by one checker of the harness (JEPSEN.md has the
// table, jepsen.TestCheckersCatchBugs runs them).
package bugs

// Env names the environment variable that lists the faults to switch on,
// comma-separated.
const Env = "LINKRAFT_JEPSEN_BUGS"

// The deliberate faults.
const (
	// FollowerRead: a replica answers its own miss with 404 at once,
	// without asking the shard leader (breaks read-your-writes; ryw).
	FollowerRead = "follower-read"
	// EarlyAck: a create whose outcome is unknown (not committed, leader
	// unreachable) is acknowledged anyway (loses acknowledged creates; set).
	EarlyAck = "early-ack"
	// NoLease: IDs come from a node-local counter instead of a range leased
	// through the meta group (codes outside every lease; unique-ids).
	NoLease = "no-lease"
	// ClickDouble: every click batch is applied a second time under another
	// node name, out of reach of the per-node sequence check (over-counted
	// clicks; counter).
	ClickDouble = "click-double"
	// StaleConsistent: a ?consistent=true read on a replica that does not
	// lead the shard is answered from that replica's own state instead of
	// the leader's (stale linearizable reads; register).
	StaleConsistent = "stale-consistent"
	// TombstoneReuse: a create succeeds on a deleted code, reviving it
	// (a code handed out twice; register).
	TombstoneReuse = "tombstone-reuse"
	// NoInvalidate: an applied update or delete leaves the replica's cached
	// copy of the link alone and gossips no invalidation, so redirects keep
	// the old answer (converge).
	NoInvalidate = "no-invalidate"
	// RetryNewCode: the answer to every fifth generated-code create is
	// treated as lost and the create retried under a fresh code instead of
	// the same code and nonce (one attempt stored twice; set).
	RetryNewCode = "retry-new-code"
	// DropClickBatch: every third click batch a node submits is reported
	// as committed without being proposed (lost clicks; counter).
	DropClickBatch = "drop-click-batch"
	// PanicOnce: the first redirect the fast path serves in a process
	// panics (recovered and logged; logs).
	PanicOnce = "panic-once"
	// LoseLastApply: on restart, every replica undoes the last link write
	// it applied before it stopped (the first replica in the shard's
	// placement the last two), while its applied index still counts them
	// (register, through the final reads; replicas).
	LoseLastApply = "lose-last-apply-on-restart"
	// ExitOnce: a node exits with status 3, without a log line, ten seconds
	// after its first start on a data dir (nodes).
	ExitOnce = "exit-once"
	// LogNoSync: the Raft log stores commit without fdatasync, so an entry
	// is acknowledged before it is durable anywhere (a power cut to every
	// node loses acknowledged creates; set).
	LogNoSync = "log-nosync"
)

// All lists every fault, in the order of JEPSEN.md's table.
var All = []string{FollowerRead, EarlyAck, NoLease, ClickDouble, StaleConsistent, TombstoneReuse,
	NoInvalidate, RetryNewCode, DropClickBatch, PanicOnce, LoseLastApply, ExitOnce, LogNoSync}
