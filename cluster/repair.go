package cluster

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/meta"
	"github.com/linkraft/linkraft/raftgroup"
	"github.com/linkraft/linkraft/shard"
)

// ErrNodeRunning is returned by RepairGroup when the node holds the files.
var ErrNodeRunning = errors.New("the node is running: stop it first")

// GroupDir returns the directory of group ("meta" or a shard number) in a
// node's data dir.
func GroupDir(dataDir, group string) (string, error) {
	if group == "meta" {
		return filepath.Join(dataDir, "meta"), nil
	}
	if n, err := strconv.Atoi(group); err != nil || n < 0 || n > 4096 {
		return "", fmt.Errorf("group %q: want meta or a shard number", group)
	}
	return filepath.Join(dataDir, "shards", group), nil
}

// Repaired is what RepairGroup did.
type Repaired struct {
	// Aside is where the replica's files went.
	Aside string
	// Alone says the replica was its group's only one: the whole group
	// was set aside, and the node starts it anew, empty (its links are
	// gone unless a backup brings them back).
	Alone bool
}

// ErrSoleMeta is returned by RepairGroup for the meta group of a node that
// is its only replica: there is nothing to catch up from, and a new meta
// group would be a new cluster.
var ErrSoleMeta = errors.New("this node holds the meta group's only replica: it cannot be repaired in place; start a new node and restore a backup into it (linknode restore)")

// RepairGroup sets one replica's damaged state aside so that the node,
// restarted, catches up from its group's leader (linknode repair-shard).
// The node must be stopped. The state file and the snapshots move to
// <data-dir>/quarantine/<group>-<time>/; the Raft log's entries are
// deleted, but its stable store (current term and vote) is kept, so the
// replica never votes twice in a term it took part in. With an empty log
// and no snapshot, the leader sends it a snapshot of its state, or the
// whole log.
//
// A shard whose only replica this is (a single node, or one replica per
// shard) has nothing to catch up from: its whole group — state, snapshots
// and Raft log — is set aside, and the node, restarted, starts the shard
// anew and empty (Repaired.Alone), so it serves again; a backup restored
// with resume brings its links back. The meta group's only replica is
// refused (ErrSoleMeta). A damaged raft.db of a group with other replicas
// cannot be repaired this way (the vote is in it): remove the node and
// start it under a new ID.
func RepairGroup(dataDir, group string) (Repaired, error) {
	dir, err := GroupDir(dataDir, group)
	if err != nil {
		return Repaired{}, err
	}
	if _, err := os.Stat(dir); err != nil {
		return Repaired{}, fmt.Errorf("group %s: %w", group, err)
	}
	name := "meta"
	if group != "meta" {
		name = path.Join("shards", group)
	}
	logs, err := offlineLogs(dataDir)
	if errors.Is(err, raftgroup.ErrInUse) {
		return Repaired{}, fmt.Errorf("%w: %w", err, ErrNodeRunning)
	}
	if err != nil {
		return Repaired{}, err
	}
	if logs != nil {
		defer logs.Close()
	}
	view, err := offlineLog(logs, dataDir, name)
	if err != nil {
		return Repaired{}, err
	}
	logPath := filepath.Join(dir, "raft.db")
	if view != nil {
		logPath = fmt.Sprintf("%s (group %s)", logs.Path(), name)
	}
	servers, err := raftgroup.LatestServers(dir, view)
	if errors.Is(err, raftgroup.ErrInUse) {
		return Repaired{}, fmt.Errorf("%s: %w", logPath, ErrNodeRunning)
	}
	if err != nil {
		return Repaired{}, fmt.Errorf("%s cannot be opened (%v): the Raft log and vote are damaged too; remove this node (linknode remove) and start it under a new -node-id with an empty data dir", logPath, err)
	}
	stamp := time.Now().UTC().Format("20060102T150405Z")
	aside := filepath.Join(dataDir, "quarantine", fmt.Sprintf("%s-%s", filepath.Base(dir), stamp))
	if group != "meta" {
		aside = filepath.Join(dataDir, "quarantine", fmt.Sprintf("shard-%s-%s", group, stamp))
	}
	if sole(dataDir, servers) {
		if group == "meta" {
			return Repaired{}, ErrSoleMeta
		}
		// Nothing to catch up from, and no vote anyone else relies on:
		// the whole group goes aside, its log with it (out of the shared
		// log first: a crash before the move leaves the group as it was).
		if view != nil {
			if err := logs.Export(name, filepath.Join(dir, "raft.db")); err != nil {
				return Repaired{}, err
			}
		}
		if err := os.MkdirAll(filepath.Dir(aside), 0o750); err != nil {
			return Repaired{}, err
		}
		return Repaired{Aside: aside, Alone: true}, os.Rename(dir, aside)
	}
	var store raft.LogStore = view
	if view == nil {
		own, err := raftboltdb.New(raftboltdb.Options{Path: logPath, BoltOptions: &bolt.Options{Timeout: time.Second}})
		if err != nil {
			return Repaired{}, fmt.Errorf("%s: %w", logPath, err)
		}
		defer own.Close()
		store = own
	}
	return Repaired{Aside: aside}, setAside(store, dir, aside, group)
}

// setAside moves a replica's state file and snapshots from dir to aside
// and empties its Raft log in store, keeping its term and vote.
func setAside(store raft.LogStore, dir, aside, group string) error {
	if err := os.MkdirAll(aside, 0o750); err != nil {
		return err
	}
	for _, name := range []string{"state.db", "snapshots"} {
		if err := os.Rename(filepath.Join(dir, name), filepath.Join(aside, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	first, ferr := store.FirstIndex()
	last, lerr := store.LastIndex()
	if err := errors.Join(ferr, lerr); err != nil {
		return fmt.Errorf("read the Raft log of group %s: %w", group, err)
	}
	if last > 0 {
		if err := store.DeleteRange(first, last); err != nil {
			return fmt.Errorf("truncate the Raft log of group %s: %w", group, err)
		}
	}
	return nil
}

// sole reports whether the node of dataDir is the only voter of servers.
func sole(dataDir string, servers []raftgroup.Server) bool {
	id, err := storedNodeID(dataDir)
	if err != nil {
		return false
	}
	voters := 0
	self := false
	for _, s := range servers {
		if !s.Nonvoter {
			voters++
			self = self || s.ID == id
		}
	}
	return voters == 1 && self
}

// RecoveredGroup is one group RecoverNode rewrote, and the servers it now
// has.
type RecoveredGroup struct {
	Group   string
	Servers []string
}

// ErrNotSurvivor is returned by RecoverNode when the node itself is not
// among the servers to keep.
var ErrNotSurvivor = errors.New("this node is not among the nodes to keep")

// RecoverNode rewrites every Raft group of the stopped node whose data dir
// is dataDir — the meta group and each shard it hosts — to the servers in
// keep that the group had, after a majority of the cluster is lost for good
// (linknode recover; raftgroup.Recover). Run it on every survivor, with the
// same keep, while all of them are stopped; then start them, remove the lost
// nodes (linknode remove), and add new ones. A shard replica whose group
// holds none of keep (one this node was taken out of) is left as it is and
// not reported.
func RecoverNode(dataDir string, keep []string) ([]RecoveredGroup, error) {
	id, err := storedNodeID(dataDir)
	if err != nil {
		return nil, fmt.Errorf("%s is not a node's data dir: %w", dataDir, err)
	}
	if !slices.Contains(keep, id) {
		return nil, fmt.Errorf("%w: %s keeps %v", ErrNotSurvivor, id, keep)
	}
	logs, err := offlineLogs(dataDir)
	if err != nil {
		return nil, err
	}
	if logs != nil {
		defer logs.Close()
	}
	view, err := offlineLog(logs, dataDir, "meta")
	if err != nil {
		return nil, err
	}
	var out []RecoveredGroup
	servers, err := meta.Recover(filepath.Join(dataDir, "meta"), id, keep, view)
	if err != nil {
		return out, fmt.Errorf("meta group: %w", err)
	}
	out = append(out, RecoveredGroup{Group: "meta", Servers: serverIDs(servers)})
	entries, err := os.ReadDir(filepath.Join(dataDir, "shards"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return out, err
	}
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if !e.IsDir() || err != nil || n < 0 {
			continue
		}
		view, err := offlineLog(logs, dataDir, path.Join("shards", e.Name()))
		if err != nil {
			return out, err
		}
		servers, err := shard.Recover(command.ShardID(n), filepath.Join(dataDir, "shards", e.Name()), id, keep, view)
		if errors.Is(err, raftgroup.ErrNoSurvivor) {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("shard %d: %w", n, err)
		}
		out = append(out, RecoveredGroup{Group: "shard " + e.Name(), Servers: serverIDs(servers)})
	}
	return out, nil
}

func serverIDs(servers []raftgroup.Server) []string {
	ids := make([]string, len(servers))
	for i, s := range servers {
		ids[i] = s.ID
	}
	return ids
}
