package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/testkit"
	"github.com/linkraft/linkraft/internal/tmpfs"
	"github.com/linkraft/linkraft/link"
)

// fileApplied is the applied index the state file has committed.
func fileApplied(tb testing.TB, f *ShardFSM) uint64 {
	tb.Helper()
	var n uint64
	if err := f.viewCommitted(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(keyApplied); len(v) == 8 {
			n = binary.BigEndian.Uint64(v)
		}
		return nil
	}); err != nil {
		tb.Fatal(err)
	}
	return n
}

// crash drops the open transaction and closes the file without a commit:
// what the file holds is what a process killed at this moment leaves.
func crash(f *ShardFSM) {
	f.txMu.Lock()
	if f.tx != nil {
		_ = f.tx.Rollback()
		f.tx = nil
	}
	if f.timer != nil {
		f.timer.Stop()
	}
	f.dead.Store(true)
	f.txMu.Unlock()
	_ = f.db.Close()
}

// TestIntervalCommitAnswersFromMemory: with a commit interval, applied
// creates are answered and readable at once (Get from the pending
// overlay, a listing after committing them), while the file commits them
// later, in one transaction.
func TestIntervalCommitAnswersFromMemory(t *testing.T) {
	var changed []string
	f := mustShard(t, ShardConfig{CommitInterval: time.Hour, OnChange: func(l *link.Link) { changed = append(changed, l.Code) }})
	for i := uint64(1); i <= 5; i++ {
		if r := result(t, f.Apply(createLog(i, fmt.Sprintf("c%d", i)))); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if f.AppliedIndex() != 5 || len(changed) != 5 {
		t.Fatalf("applied %d, changes %v", f.AppliedIndex(), changed)
	}
	if got := fileApplied(t, f); got != 0 {
		t.Fatalf("the file committed up to %d within the interval", got)
	}
	if l, err := f.Get("c3"); err != nil || l.URL != "https://e.example/c3" {
		t.Fatalf("get from the pending overlay: %v, %v", l, err)
	}
	// A delete is a pending tombstone.
	if r := result(t, f.Apply(&raft.Log{Index: 6, Term: 1, Type: raft.LogCommand, Data: (&command.Delete{Code: "c1", Now: t0}).Encode()})); r.Err != nil {
		t.Fatal(r.Err)
	}
	if l, err := f.Get("c1"); err != nil || !l.Deleted {
		t.Fatalf("a pending delete: %+v, %v", l, err)
	}
	part, err := f.ListLinks(link.ListQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(part.Links) != 4 {
		t.Fatalf("a listing saw %d links, want the 4 live ones", len(part.Links))
	}
	if got := fileApplied(t, f); got != 6 {
		t.Fatalf("after a listing the file holds %d, want 6 (a scan commits what is pending)", got)
	}
	if len(f.pending) != 0 {
		t.Fatalf("the overlay kept %d links after the commit", len(f.pending))
	}
}

// TestCrashBeforeCommitReplays: entries answered but not yet committed are
// lost from the file by a crash and applied again from the log on restart
// with the same results; entries the file has are skipped.
func TestCrashBeforeCommitReplays(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shard.db")
	f, err := NewShardFSM(ShardConfig{Path: path, CommitInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var logs []*raft.Log
	for i := uint64(1); i <= 6; i++ {
		logs = append(logs, createLog(i, fmt.Sprintf("r%d", i)))
	}
	first := f.ApplyBatch(logs[:3])
	if _, err := f.Snapshot(); err != nil { // commits 1-3
		t.Fatal(err)
	}
	second := f.ApplyBatch(logs[3:])
	if got := fileApplied(t, f); got != 3 {
		t.Fatalf("file at %d before the crash, want 3", got)
	}
	crash(f)

	f, err = NewShardFSM(ShardConfig{Path: path, CommitInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.AppliedIndex() != 3 {
		t.Fatalf("applied %d after the crash, want 3", f.AppliedIndex())
	}
	if _, err := f.Get("r5"); !errors.Is(err, link.ErrNotFound) {
		t.Fatalf("an uncommitted create survived the crash in the file: %v", err)
	}
	// raft applies everything after its snapshot again.
	again := f.ApplyBatch(logs)
	for i := range 3 {
		if again[i] != nil {
			t.Fatalf("entry %d applied twice: %v", i+1, again[i])
		}
		if result(t, first[i]).Err != nil {
			t.Fatal(result(t, first[i]).Err)
		}
	}
	for i := 3; i < 6; i++ {
		a, b := result(t, second[i-3]), result(t, again[i])
		if b.Err != nil || a.Link.Code != b.Link.Code || !a.Link.CreatedAt.Equal(b.Link.CreatedAt) || a.Link.Version != b.Link.Version {
			t.Fatalf("entry %d: first %+v, replayed %+v (%v)", i+1, a.Link, b.Link, b.Err)
		}
	}
	if _, err := f.Get("r6"); err != nil {
		t.Fatal(err)
	}
}

// TestIntervalCommitsByItself: nothing but the interval commits what is
// pending, and a snapshot marker never claims what the file lacks.
func TestIntervalCommitsByItself(t *testing.T) {
	f := mustShard(t, ShardConfig{CommitInterval: 20 * time.Millisecond})
	f.ApplyBatch([]*raft.Log{createLog(1, "a"), createLog(2, "b")})
	testkit.WaitFor(t, 10*time.Second, "the interval's commit", func() bool { return fileApplied(t, f) == 2 })
	f.Apply(createLog(3, "c"))
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	if m := uint64(snap.(liveMarker)); m != 3 || fileApplied(t, f) != 3 {
		t.Fatalf("marker %d, file at %d", m, fileApplied(t, f))
	}
}

// TestIntervalCommitOnAFullDisk: with a commit interval, a batch is
// answered before its commit; when the commit fails (a full disk), the
// store reports the stall, keeps answering point reads from memory,
// refuses reads that need the file (ErrStalled) and snapshots, holds the
// next batch until the pending ones commit, and carries on by itself when
// space returns, with everything applied in the file.
func TestIntervalCommitOnAFullDisk(t *testing.T) {
	dir := tmpfs.Mount(t, "4m")
	f, err := NewShardFSM(ShardConfig{Path: filepath.Join(dir, "shard.db"), CommitInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	result(t, f.Apply(createLog(1, "first")))
	testkit.WaitFor(t, 10*time.Second, "the first commit", func() bool { return fileApplied(t, f) == 1 })
	filler := tmpfs.Fill(t, dir, 0)
	var logs []*raft.Log
	for i := range 8 {
		c := &command.CreateIfAbsent{Code: "big" + string(rune('a'+i)), Request: link.CreateRequest{URL: "https://a.example/" + strings.Repeat("x", 200<<10)}}
		logs = append(logs, &raft.Log{Index: uint64(2 + i), Type: raft.LogCommand, Data: c.Encode()})
	}
	for _, o := range f.ApplyBatch(logs) { // answered before the commit
		result(t, o)
	}
	testkit.WaitFor(t, 10*time.Second, "a stall reported on a full disk", func() bool { return f.Stalled() != nil })
	if st := f.Stalled(); st.Index != 9 || !strings.Contains(st.Err, "no space") {
		t.Fatalf("stall %+v", st)
	}
	if l, err := f.Get("bigh"); err != nil || l.Code != "bigh" {
		t.Fatalf("a point read of a pending create during the stall: %v", err)
	}
	if _, err := f.ListLinks(link.ListQuery{Limit: 10}); !errors.Is(err, ErrStalled) || !errors.Is(err, link.ErrUnavailable) {
		t.Fatalf("a listing during the stall: %v", err)
	}
	if _, err := f.Snapshot(); !errors.Is(err, ErrNotApplying) {
		t.Fatalf("snapshot during a stall: %v", err)
	}
	done := make(chan any, 1)
	go func() { done <- f.Apply(createLog(10, "next")) }()
	select {
	case <-done:
		t.Fatal("a batch was applied while the pending ones could not commit")
	case <-time.After(100 * time.Millisecond):
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-done:
		result(t, o)
	case <-time.After(30 * time.Second):
		t.Fatal("apply did not resume after space returned")
	}
	testkit.WaitFor(t, 10*time.Second, "everything committed", func() bool { return fileApplied(t, f) == 10 })
	if f.Stalled() != nil {
		t.Fatalf("stall after the commit: %+v", f.Stalled())
	}
	part, err := f.ListLinks(link.ListQuery{Limit: 20})
	if err != nil || len(part.Links) != 10 {
		t.Fatalf("listing after the stall: %d links, %v", len(part.Links), err)
	}
}

// TestTagChangesInOneTransaction: a link created and then retagged or
// deleted in the same transaction (one batch, or one commit interval)
// keeps exact tag counts. bbolt's Get answers nil for an index entry
// (an empty value) put in the same transaction, so the old index code took
// the entry for absent and never decremented its count.
func TestTagChangesInOneTransaction(t *testing.T) {
	for _, interval := range []time.Duration{0, time.Hour} {
		t.Run(interval.String(), func(t *testing.T) {
			f := mustShard(t, ShardConfig{CommitInterval: interval})
			mk := func(i uint64, code, tag string) *raft.Log {
				c := &command.CreateIfAbsent{Code: code, Now: t0, Nonce: i, Request: link.CreateRequest{URL: "https://e.example/", Tags: []string{tag}}}
				return &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: c.Encode()}
			}
			green := []string{"green"}
			out := f.ApplyBatch([]*raft.Log{
				mk(1, "a", "red"), mk(2, "b", "red"), mk(3, "c", "blue"),
				{Index: 4, Term: 1, Type: raft.LogCommand, Data: (&command.Update{Code: "a", Now: t0, Patch: link.Patch{Tags: &green}}).Encode()},
				{Index: 5, Term: 1, Type: raft.LogCommand, Data: (&command.Delete{Code: "c", Now: t0}).Encode()},
			})
			for _, o := range out {
				if r := result(t, o); r.Err != nil {
					t.Fatal(r.Err)
				}
			}
			got, err := f.TagCounts("")
			if err != nil {
				t.Fatal(err)
			}
			if want := map[string]uint64{"red": 1, "green": 1}; !maps.Equal(got, want) {
				t.Fatalf("tag counts %v, want %v", got, want)
			}
		})
	}
}

// TestIntervalCommitUnderConcurrentReads: one goroutine applies batches
// that grow the file (bbolt remaps its mmap in commits), the interval
// timer commits every millisecond, and readers scan (which commits first),
// read points, take snapshots and state copies at the same time. Nothing
// deadlocks, and every read of an acknowledged create finds it.
func TestIntervalCommitUnderConcurrentReads(t *testing.T) {
	f := mustShard(t, ShardConfig{CommitInterval: time.Millisecond})
	stop := make(chan struct{})
	var acked atomic.Uint64
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				n := acked.Load()
				switch (i + r) % 4 {
				case 0:
					if n == 0 {
						continue
					}
					if _, err := f.Get(fmt.Sprintf("k%07d", n)); err != nil {
						errs <- fmt.Errorf("get of acknowledged k%07d: %w", n, err)
						return
					}
				case 1:
					c, err := f.Count()
					if err != nil || uint64(c) < n {
						errs <- fmt.Errorf("count %d (%v) after %d acknowledged", c, err, n)
						return
					}
				case 2:
					size, rc, err := f.OpenState()
					if err != nil {
						errs <- err
						return
					}
					rc.Close()
					if size == 0 {
						errs <- errors.New("an empty state copy")
						return
					}
				case 3:
					if _, err := f.ListLinks(link.ListQuery{Limit: 5, Desc: true}); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	deadline := time.Now().Add(2 * time.Second)
	index := uint64(0)
	for time.Now().Before(deadline) {
		var logs []*raft.Log
		for range 16 {
			index++
			c := &command.CreateIfAbsent{Code: fmt.Sprintf("k%07d", index), Now: t0, Nonce: index,
				Request: link.CreateRequest{URL: "https://e.example/" + strings.Repeat("u", 2000)}}
			logs = append(logs, &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: c.Encode()})
		}
		for _, o := range f.ApplyBatch(logs) {
			if r := result(t, o); r.Err != nil {
				t.Fatal(r.Err)
			}
		}
		acked.Store(index)
		if index%256 == 0 {
			// Refused while a reader's state copy is out: raft tries later.
			if _, err := f.Snapshot(); err != nil && !errors.Is(err, ErrSendInProgress) {
				t.Fatal(err)
			}
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if c, err := f.Count(); err != nil || uint64(c) != index {
		t.Fatalf("count %d (%v), want %d", c, err, index)
	}
}
