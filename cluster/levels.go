package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/atomicfile"
	"github.com/linkraft/linkraft/link"
)

// Rolling upgrades. Every node gossips the feature level of its version:
// the meta leader proposes a command type only once every live member's
// level knows it, so that a rolling upgrade never halts an older node's
// group at an unknown entry, and a link field only once every member
// stores it (an older replica would skip it and hold other state). The
// peer protocol needs no level: an older peer is found at the hello, and
// spoken to in its own protocol (package peer).

// Feature levels of what the cluster does besides link fields (those are
// in command's field table: command.LevelLinkMeta, ...).
const (
	// levelKeys is the feature level of keys and the blocklist.
	levelKeys = 2
	// levelListing is the feature level of listings: an older node
	// answers its part of one with an error, so a listing waits for every
	// node.
	levelListing = 3
	// levelIdempotency is the feature level of command.ClaimKey: an older
	// node's shard would halt at the unknown entry.
	levelIdempotency = 4
	// levelAdmit is the feature level of AdmitNode, which records a
	// node's level in the registry.
	levelAdmit = 5
	// levelListClicks is the feature level of a listing by clicks (an
	// older node answers its part of one in creation order).
	levelListClicks = 5
	// levelBackup is the feature level of a backup (every node answers
	// its shards' parts) and of a restore (an older replica would halt
	// at a RestoreLinks entry).
	levelBackup = 6
	// levelMoves is the feature level of replica moves and drains.
	levelMoves = 7
)

// supports returns nil if the cluster may take what needs level, else an
// error wrapping link.ErrUpgradeNeeded that says which node is behind.
// Every live member must gossip at least level. From
// command.LevelLinkAccess on (fields an older replica would drop, then
// serve the link without), that is not enough: a node that is down, or
// rolled back, misses from gossip and would come back to apply the entries
// with an older version. So every node of the meta registry and of the
// meta group that is not removed must also have been admitted at level or
// later (AdmitNode records the level it gossiped). A node that never comes
// back holds those fields back until the operator removes it.
func (n *Node) supports(level int) error {
	if !n.clusterAt(level) {
		return fmt.Errorf("%w (a live node gossips a feature level below %d)", link.ErrUpgradeNeeded, level)
	}
	if n.gossip == nil || level < command.LevelLinkAccess {
		return nil
	}
	id, at, err := n.meta.Behind(level)
	if err != nil {
		return fmt.Errorf("%w: %w", link.ErrUnavailable, err)
	}
	if id != "" {
		return fmt.Errorf("%w: node %s was last admitted at feature level %d, and this needs %d: start it on this version, or remove it (linknode remove %s) if it is gone for good",
			link.ErrUpgradeNeeded, id, at, level, id)
	}
	return nil
}

// ClusterLevel is the feature level the whole cluster runs at, as this
// node knows it: the lowest of its own, every live member's (gossip) and
// every registered member's that was not removed (the levels the meta
// leader admitted them at, in the meta group). What needs a higher level
// waits (link.ErrUpgradeNeeded).
func (n *Node) ClusterLevel() int {
	level := n.cfg.FeatureLevel
	if n.gossip != nil {
		for _, m := range n.gossip.members() {
			if m.Alive {
				level = min(level, m.Level)
			}
		}
		if lowest, ok, err := n.meta.LowestLevel(); err == nil && ok {
			level = min(level, lowest)
		}
	}
	return level
}

// clusterAt reports whether every live member runs at least level.
func (n *Node) clusterAt(level int) bool {
	if n.gossip == nil || level <= 0 {
		return true
	}
	for _, m := range n.gossip.members() {
		if m.Alive && m.Level < level {
			return false
		}
	}
	return true
}

// LiveNodes is how many nodes of the cluster this node sees alive, itself
// included (1 before gossip starts).
func (a *Admin) LiveNodes() int {
	if a.n.gossip == nil {
		return 1
	}
	return max(a.n.gossip.alive(), 1)
}

// ErrNewerData is returned by Open for a data dir that a newer version
// wrote at a feature level this one does not know.
var ErrNewerData = errors.New("the data dir was written by a newer version")

// recordDataLevel refuses a data dir last run at a feature level above
// this version's, and records level (the one this run gossips: lowered by
// -feature-level before a rollback) as the data dir's. A rollback thus
// goes: restart each node on the new version with -feature-level set to
// the old version's, then swap the binary.
func recordDataLevel(dataDir string, level int) error {
	was, err := dataLevel(dataDir)
	if err != nil || was == level {
		return err
	}
	return atomicfile.Write(filepath.Join(dataDir, "feature-level"), []byte(strconv.Itoa(level)+"\n"), 0o600)
}

// checkDataLevel refuses a data dir last run at a feature level above this
// version's (ErrNewerData).
func checkDataLevel(dataDir string) error {
	_, err := dataLevel(dataDir)
	return err
}

// dataLevel is the feature level recorded in dataDir (0 for none yet); a
// level above this version's is ErrNewerData.
func dataLevel(dataDir string) (int, error) {
	p := filepath.Join(dataDir, "feature-level")
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	was, perr := strconv.Atoi(strings.TrimSpace(string(b)))
	if perr != nil {
		return 0, fmt.Errorf("cluster: %s holds %q, not a feature level: write the level this data dir last ran at there (this version's is %d), or restore the data dir from a backup", p, b, FeatureLevel)
	}
	if was > FeatureLevel {
		return 0, fmt.Errorf("%w: %s was last run at feature level %d, and this version knows up to %d. Run the newer version; to go back to this one, start the newer one on it once with -feature-level %d first",
			ErrNewerData, dataDir, was, FeatureLevel, FeatureLevel)
	}
	return was, nil
}
