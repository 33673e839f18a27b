package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/meta"
	"github.com/linkraft/linkraft/raftgroup"
	"github.com/linkraft/linkraft/shard"
	bolt "go.etcd.io/bbolt"
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

// RepairGroup sets one replica's damaged state aside so that the node,
// restarted, catches up from its group's leader (linknode repair-shard).
// The node must be stopped. The state file and the snapshots move to
// <data-dir>/quarantine/<group>-<time>/; the Raft log's entries are
// deleted, but its stable store (current term and vote) is kept, so the
// replica never votes twice in a term it took part in. With an empty log
// and no snapshot, the leader sends it a snapshot of its state, or the
// whole log. It returns where the files went.
//
// Use it only while the group has other healthy replicas: this one's state
// is thrown away. A damaged raft.db cannot be repaired this way (the vote
// is in it): remove the node and start it under a new ID.
func RepairGroup(dataDir, group string) (string, error) {
	dir, err := GroupDir(dataDir, group)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("group %s: %w", group, err)
	}
	logPath := filepath.Join(dir, "raft.db")
	store, err := raftboltdb.New(raftboltdb.Options{Path: logPath, BoltOptions: &bolt.Options{Timeout: time.Second}})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return "", fmt.Errorf("%s: %w", logPath, ErrNodeRunning)
		}
		return "", fmt.Errorf("%s cannot be opened (%v): the Raft log and vote are damaged too; remove this node (linknode remove) and start it under a new -node-id with an empty data dir", logPath, err)
	}
	aside := filepath.Join(dataDir, "quarantine", fmt.Sprintf("%s-%s", filepath.Base(dir), time.Now().UTC().Format("20060102T150405Z")))
	if group != "meta" {
		aside = filepath.Join(dataDir, "quarantine", fmt.Sprintf("shard-%s-%s", group, time.Now().UTC().Format("20060102T150405Z")))
	}
	if err := os.MkdirAll(aside, 0o750); err != nil {
		store.Close()
		return "", err
	}
	for _, name := range []string{"state.db", "snapshots"} {
		if err := os.Rename(filepath.Join(dir, name), filepath.Join(aside, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			store.Close()
			return "", err
		}
	}
	first, ferr := store.FirstIndex()
	last, lerr := store.LastIndex()
	if ferr == nil && lerr == nil && last > 0 {
		if err := store.DeleteRange(first, last); err != nil {
			store.Close()
			return "", fmt.Errorf("truncate the Raft log of group %s: %w", group, err)
		}
	}
	if err := store.Close(); err != nil {
		return "", err
	}
	return aside, nil
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
	b, err := os.ReadFile(filepath.Join(dataDir, "node-id"))
	if err != nil {
		return nil, fmt.Errorf("%s is not a node's data dir: %w", dataDir, err)
	}
	id := strings.TrimSpace(string(b))
	if !slices.Contains(keep, id) {
		return nil, fmt.Errorf("%w: %s keeps %v", ErrNotSurvivor, id, keep)
	}
	var out []RecoveredGroup
	servers, err := meta.Recover(filepath.Join(dataDir, "meta"), id, keep)
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
		servers, err := shard.Recover(command.ShardID(n), filepath.Join(dataDir, "shards", e.Name()), id, keep)
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
