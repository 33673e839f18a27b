package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
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
