//go:build jepsenbugs

package cluster

import (
	"os"
	"slices"
	"strings"
)

// BugsEnv names the environment variable that turns on deliberate faults in
// a binary built with -tags jepsenbugs: a comma-separated list of
// follower-read, early-ack, no-lease and click-double. The chaos harness's tests use them
// to prove that its checkers notice each kind of bug. Never ship such a
// build.
const BugsEnv = "LINKRAFT_JEPSEN_BUGS"

// bugs holds the switches read once when the node is built.
type bugs struct{ on []string }

func loadBugs() bugs {
	return bugs{on: strings.Split(os.Getenv(BugsEnv), ",")}
}

// followerRead: a replica's local miss is answered 404 at once, without
// asking the shard leader (breaks read-your-writes across nodes).
func (b bugs) followerRead() bool { return slices.Contains(b.on, "follower-read") }

// earlyAck: a create whose outcome is unknown (not committed yet, leader
// unreachable) is acknowledged anyway (loses acknowledged creates).
func (b bugs) earlyAck() bool { return slices.Contains(b.on, "early-ack") }

// noLease: IDs come from a node-local counter instead of a range leased
// through the meta group (codes outside every lease; would collide without
// the create-if-absent check).
func (b bugs) noLease() bool { return slices.Contains(b.on, "no-lease") }

// clickDouble: every click batch is also applied under another node name,
// so the FSM's per-node sequence check cannot see the repeat (clicks
// counted twice).
func (b bugs) clickDouble() bool { return slices.Contains(b.on, "click-double") }
