package cluster

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/linkraft/linkraft/raftgroup/nodelog"
)

// TestOfflineCommandFinishesAnInterruptedMove: a group whose raft.db is
// there beside its part of the shared log (a move in or out that stopped
// between its two steps) is read from raft.db by the offline commands, and
// its part of the shared log is dropped, so that the next start (at any
// level) reads what the command changed rather than the other copy.
func TestOfflineCommandFinishesAnInterruptedMove(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	logs, err := nodelog.Open(nodelog.Config{Path: filepath.Join(dataDir, logDir)})
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	for _, name := range []string{"shards/0", "shards/1"} {
		if err := os.MkdirAll(filepath.Join(dataDir, filepath.FromSlash(name)), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := logs.Log(name).StoreLogs([]*raft.Log{{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte("x")}}); err != nil {
			t.Fatal(err)
		}
	}
	// shards/0 was exported and the node stopped before the drop.
	if err := logs.Export("shards/0", filepath.Join(dataDir, "shards", "0", "raft.db")); err != nil {
		t.Fatal(err)
	}
	if err := logs.Log("shards/0").StoreLogs([]*raft.Log{{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	view, err := offlineLog(logs, dataDir, "shards/0")
	if err != nil || view != nil {
		t.Fatalf("a group with both copies: view %v, %v (want its raft.db)", view, err)
	}
	if ok, err := logs.Has("shards/0"); err != nil || ok {
		t.Fatalf("its part of the shared log is still there: %v %v", ok, err)
	}
	view, err = offlineLog(logs, dataDir, "shards/1")
	if err != nil || view == nil {
		t.Fatalf("a group in the shared log alone: view %v, %v", view, err)
	}
	if last, err := view.LastIndex(); err != nil || last != 1 {
		t.Fatalf("its log: last %d, %v", last, err)
	}
	if view, err := offlineLog(nil, dataDir, "shards/1"); err != nil || view != nil {
		t.Fatalf("no shared log: %v %v", view, err)
	}
}

// TestLoweredLevelIsRecordedAfterTheSplit: a node lowered below the shared
// log's level whose logs cannot be moved out keeps the data dir's level
// where it was, so an older version still refuses the data dir (it would
// find no log for the groups still in the shared file).
func TestLoweredLevelIsRecordedAfterTheSplit(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	if err := recordDataLevel(dataDir, levelSharedLog); err != nil {
		t.Fatal(err)
	}
	logs, err := nodelog.Open(nodelog.Config{Path: filepath.Join(dataDir, logDir)})
	if err != nil {
		t.Fatal(err)
	}
	if err := logs.Log("meta").SetUint64([]byte("CurrentTerm"), 3); err != nil {
		t.Fatal(err)
	}
	logs.Close()
	// The export's temporary file cannot be cleared: the move fails, and
	// the node with it.
	if err := os.MkdirAll(filepath.Join(dataDir, "meta", "raft.db.export", "x"), 0o750); err != nil {
		t.Fatal(err)
	}
	lowered, err := New(Config{DataDir: dataDir, NodeID: "n1", RaftAddr: "127.0.0.1:0", Insecure: true, FeatureLevel: levelSharedLog - 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := lowered.Open(ctx); err == nil || !strings.Contains(err.Error(), "moving the Raft logs out") {
		lowered.Close()
		t.Fatalf("a node whose logs cannot be moved out opened: %v", err)
	}
	if was, err := dataLevel(dataDir); err != nil || was != levelSharedLog {
		t.Fatalf("recorded level %d, %v; want %d until the logs are out", was, err, levelSharedLog)
	}
	if _, err := os.Stat(filepath.Join(dataDir, logDir)); err != nil {
		t.Fatalf("the shared log is gone though its group was not moved: %v", err)
	}
	if err := os.RemoveAll(filepath.Join(dataDir, "meta", "raft.db.export")); err != nil {
		t.Fatal(err)
	}
	n := &Node{cfg: Config{DataDir: dataDir, FeatureLevel: levelSharedLog - 1}, log: slog.New(slog.DiscardHandler)}
	if err := n.openLogs(); err != nil {
		t.Fatal(err)
	}
	if was, err := dataLevel(dataDir); err != nil || was != levelSharedLog-1 {
		t.Fatalf("recorded level %d, %v after the split", was, err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, logDir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the shared log is still there after the split: %v", err)
	}
}

// TestSplitKeepsTheWholeCopy: a group whose raft.db is there beside a
// copy in the shared log that an import cut short keeps its raft.db when
// the logs are moved out (the copy is dropped, not exported over it); and
// a data dir holding a development build's bbolt shared log is refused.
func TestSplitKeepsTheWholeCopy(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	dir := filepath.Join(dataDir, "shards", "0")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	own, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db")})
	if err != nil {
		t.Fatal(err)
	}
	var whole []*raft.Log
	for i := uint64(1); i <= 10; i++ {
		whole = append(whole, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte("x")})
	}
	if err := own.StoreLogs(whole); err != nil {
		t.Fatal(err)
	}
	own.Close()
	logs, err := nodelog.Open(nodelog.Config{Path: filepath.Join(dataDir, logDir)})
	if err != nil {
		t.Fatal(err)
	}
	if err := logs.Log("shards/0").StoreLogs(whole[:3]); err != nil { // the import, cut short
		t.Fatal(err)
	}
	logs.Close()
	if err := splitLogs(dataDir, func(string, ...any) {}); err != nil {
		t.Fatal(err)
	}
	own, err = raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	if last, err := own.LastIndex(); err != nil || last != 10 {
		t.Fatalf("raft.db after the split: last %d, %v (the partial copy was exported over it)", last, err)
	}

	if err := os.WriteFile(filepath.Join(dataDir, devLogFile), []byte("bbolt"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := &Node{cfg: Config{DataDir: dataDir, FeatureLevel: levelSharedLog}, log: slog.New(slog.DiscardHandler)}
	if err := n.openLogs(); err == nil || !strings.Contains(err.Error(), devLogFile) {
		t.Fatalf("a data dir with a development build's log: %v", err)
	}
}
