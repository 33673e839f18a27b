package cluster

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"time"

	"github.com/linkraft/linkraft/internal/atomicfile"
	"github.com/linkraft/linkraft/raftgroup"
	"github.com/linkraft/linkraft/raftgroup/nodelog"
)

// The node's Raft logs. From feature level levelSharedLog on, every group
// the node runs keeps its log and stable store in one append-only log of
// the data dir (logDir, package nodelog), whose syncs serve every group at
// once;
// below it, each group keeps its own raft.db in its directory, as versions
// before that level did. The layout follows the level the node runs at,
// both ways: a node started at levelSharedLog or above moves every group's
// raft.db into the shared file, and one started below it (-feature-level,
// the first step of a rollback) moves them back out, so the older version
// finds its files. A group's log is known in the file by its directory's
// path in the data dir ("meta", "shards/3").

// levelSharedLog is the feature level of the shared Raft log.
const levelSharedLog = 8

// logDir is the shared Raft log's directory in the data dir.
const logDir = "raft-log"

// devLogFile is where development builds of the shared log kept it, in a
// bbolt file (never released): a data dir holding one is refused, since
// its groups' logs are in it.
const devLogFile = "raft-log.db"

// openLogs lays the data dir's Raft logs out for the node's feature level,
// records that level in the data dir, and opens the shared log when the
// level uses one. The record and the move go in the order that never lets
// an older version take a data dir it cannot read: up to the shared log,
// the level first (a crash in the move leaves a data dir older versions
// refuse, and this one finishes the move); down from it, the move first (a
// crash leaves the level that keeps them out until the logs are split).
func (n *Node) openLogs() error {
	dataDir := n.cfg.DataDir
	p := filepath.Join(dataDir, logDir)
	if err := os.RemoveAll(filepath.Join(dataDir, logDir+".removed")); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, devLogFile)); err == nil {
		return fmt.Errorf("cluster: %s holds %s, the Raft log of a development build of this version; start that build at -feature-level 7 to move its logs out first", dataDir, devLogFile)
	}
	if n.cfg.FeatureLevel < levelSharedLog {
		switch _, err := os.Stat(p); {
		case err == nil:
			if err := splitLogs(dataDir, n.log.Info); err != nil {
				return err
			}
		case !errors.Is(err, os.ErrNotExist):
			return fmt.Errorf("cluster: %w", err)
		}
		return recordDataLevel(dataDir, n.cfg.FeatureLevel)
	}
	if err := recordDataLevel(dataDir, n.cfg.FeatureLevel); err != nil {
		return err
	}
	logs, err := nodelog.Open(nodelog.Config{Path: p, Logger: n.log, SegmentSize: n.cfg.RaftLogSegmentBytes})
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if err := joinLogs(dataDir, logs, n.log.Info); err != nil {
		_ = logs.Close()
		return err
	}
	n.logs = logs
	return nil
}

// joinLogs moves every group's own raft.db in dataDir into logs, and drops
// the logs of groups whose directory is gone (a shard deleted after it
// left this node, the node stopping before its log was dropped).
func joinLogs(dataDir string, logs *nodelog.Store, info func(string, ...any)) error {
	names, err := groupNames(dataDir)
	if err != nil {
		return err
	}
	for _, name := range names {
		own := filepath.Join(dataDir, filepath.FromSlash(name), "raft.db")
		if _, err := os.Stat(own); err != nil {
			continue
		}
		if err := logs.Import(name, own); err != nil {
			return fmt.Errorf("cluster: moving group %s's Raft log into %s: %w", name, logs.Path(), err)
		}
		info("group's Raft log moved into the node's shared log", "group", name, "from", own)
	}
	held, err := logs.Groups()
	if err != nil {
		return err
	}
	for _, name := range held {
		if _, err := os.Stat(filepath.Join(dataDir, filepath.FromSlash(name))); errors.Is(err, os.ErrNotExist) {
			if err := logs.Drop(name); err != nil {
				return err
			}
		}
	}
	return nil
}

// splitLogs moves every group's log out of the shared log in dataDir into
// the group's own raft.db, then removes the shared log.
func splitLogs(dataDir string, info func(string, ...any)) error {
	p := filepath.Join(dataDir, logDir)
	logs, err := nodelog.Open(nodelog.Config{Path: p})
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	held, err := logs.Groups()
	for _, name := range held {
		if err != nil {
			break
		}
		dir := filepath.Join(dataDir, filepath.FromSlash(name))
		switch _, serr := os.Stat(dir); {
		case !validGroupName(name):
			err = fmt.Errorf("cluster: %s holds a log for %q, not a group of a node", p, name)
		case errors.Is(serr, os.ErrNotExist):
			err = logs.Drop(name)
		default:
			own := filepath.Join(dir, "raft.db")
			if _, serr := os.Stat(own); serr == nil {
				// A move that a stop cut short, one way or the other:
				// raft.db is whole (written whole, removed only after its
				// copy here was), the copy here perhaps not.
				err = logs.Drop(name)
				break
			}
			err = logs.Export(name, own)
			info("group's Raft log moved out of the node's shared log (a feature level below the shared log's)", "group", name)
		}
	}
	if cerr := logs.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("cluster: moving the Raft logs out of %s: %w", p, err)
	}
	return removeLogDir(dataDir)
}

// removeLogDir removes the shared log's directory: renamed first, so that
// a crash part way through the removal leaves no log with segments
// missing (it would refuse to open), only a directory the next start
// finishes removing.
func removeLogDir(dataDir string) error {
	p, gone := filepath.Join(dataDir, logDir), filepath.Join(dataDir, logDir+".removed")
	if err := os.Rename(p, gone); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := atomicfile.SyncDir(dataDir); err != nil {
		return err
	}
	return os.RemoveAll(gone)
}

// groupNames lists the groups whose directories dataDir holds, by their
// names in the shared log.
func groupNames(dataDir string) ([]string, error) {
	names := []string{"meta"}
	entries, err := os.ReadDir(filepath.Join(dataDir, "shards"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	for _, e := range entries {
		if name := path.Join("shards", e.Name()); e.IsDir() && validGroupName(name) {
			names = append(names, name)
		}
	}
	return names, nil
}

// validGroupName reports whether name is a group's name in the shared log:
// "meta" or "shards/" and a shard number.
func validGroupName(name string) bool {
	if name == "meta" {
		return true
	}
	dir, num := path.Split(name)
	n, err := strconv.Atoi(num)
	return dir == "shards/" && err == nil && n >= 0 && strconv.Itoa(n) == num
}

// groupLog returns the view of the shared log for the group in the data
// dir's directory parts ("meta"; "shards", "3"), nil when the node runs
// without one.
func (n *Node) groupLog(parts ...string) *nodelog.Log {
	if n.logs == nil {
		return nil
	}
	return n.logs.Log(path.Join(parts...))
}

// dropGroupLog drops the shared log's part of the group in parts, whose
// directory is deleted.
func (n *Node) dropGroupLog(parts ...string) error {
	if n.logs == nil {
		return nil
	}
	return n.logs.Drop(path.Join(parts...))
}

// offlineLogs opens the shared log of a stopped node's data dir for the
// offline commands (repair-shard, recover): nil when the data dir has
// none, raftgroup.ErrInUse when a running node holds it.
func offlineLogs(dataDir string) (*nodelog.Store, error) {
	p := filepath.Join(dataDir, logDir)
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	logs, err := nodelog.Open(nodelog.Config{Path: p, Timeout: time.Second})
	if errors.Is(err, nodelog.ErrLocked) {
		return nil, fmt.Errorf("%s: %w", p, raftgroup.ErrInUse)
	}
	return logs, err
}

// offlineLog is group name's view of logs, nil when logs is nil or holds
// nothing for it (the group keeps its own raft.db). A group whose raft.db
// is there beside its part of logs was being moved, one way or the other,
// when the node stopped, and the move is finished
// here toward raft.db (its part of logs dropped: raft.db is the whole
// one), so that what the offline command changes is the one copy the next
// start reads.
func offlineLog(logs *nodelog.Store, dataDir, name string) (*nodelog.Log, error) {
	if logs == nil {
		return nil, nil
	}
	ok, err := logs.Has(name)
	if err != nil || !ok {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dataDir, filepath.FromSlash(name), "raft.db")); err == nil {
		return nil, logs.Drop(name)
	}
	return logs.Log(name), nil
}

// RaftLog returns the commits of the node's shared Raft log and the writes
// they held; zeros when the node runs below the shared log's level.
func (a *Admin) RaftLog() (commits, writes uint64) {
	if a.n.logs == nil {
		return 0, 0
	}
	return a.n.logs.Commits()
}

// RaftLogSegments returns the segment files of the node's shared Raft log
// and their bytes; zeros when the node runs below its level.
func (a *Admin) RaftLogSegments() (n int, bytes int64) {
	if a.n.logs == nil {
		return 0, 0
	}
	return a.n.logs.Segments()
}
