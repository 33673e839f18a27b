package fsm

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/boltcheck"
	"github.com/linkraft/linkraft/internal/testkit"
	"github.com/linkraft/linkraft/link"
)

// createLog is the raft entry at index that creates code.
func createLog(index uint64, code string) *raft.Log {
	c := &command.CreateIfAbsent{Code: code, Now: t0, Nonce: index, Request: link.CreateRequest{URL: "https://e.example/" + code}}
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: c.Encode()}
}

// withFile opens the closed state file at path with bbolt and runs fn in
// a write transaction: the tests' way to damage a file.
func withFile(t *testing.T, path string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
}

// TestWriteTheFileRefusesStallsApply: a write bbolt refuses inside the
// apply transaction (here, a link's key that is a bucket: ErrIncompatibleValue)
// is no panic. The batch is rolled back and retried, the stall is
// reported with bbolt's reason, nothing of the batch is applied, reads go
// on, and Release ends the retries.
func TestWriteTheFileRefusesStallsApply(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shard.db")
	f := mustShard(t, ShardConfig{Path: path})
	result(t, applyAt(t, f, 1, createLog(1, "first").Data))
	f.Close()
	withFile(t, path, func(tx *bolt.Tx) error {
		_, err := tx.Bucket(bucketLinks).CreateBucket([]byte("trap"))
		return err
	})
	f = mustShard(t, ShardConfig{Path: path})
	done := make(chan []any, 1)
	go func() { done <- f.ApplyBatch([]*raft.Log{createLog(2, "fine"), createLog(3, "trap")}) }()
	testkit.WaitFor(t, 10*time.Second, "the stall reported", func() bool { return f.Stalled() != nil })
	if st := f.Stalled(); st.Index != 3 || !strings.Contains(st.Err, "incompatible") {
		t.Fatalf("stall %+v", st)
	}
	if f.Halted() != nil || f.AppliedIndex() != 1 {
		t.Fatalf("halt %+v, applied %d", f.Halted(), f.AppliedIndex())
	}
	if _, err := f.Get("fine"); !errors.Is(err, link.ErrNotFound) {
		t.Fatalf("an entry of the failed batch was applied: %v", err)
	}
	if _, err := f.Get("first"); err != nil {
		t.Fatalf("reads during the stall: %v", err)
	}
	f.Release()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Release did not end the retries")
	}
}

// TestUnreadableRecordHaltsApply: an entry whose apply meets a stored
// record that does not decode cannot succeed on a retry: the entries
// before it in the batch are applied, the group halts at it with the
// reason (the file and the record), and nothing panics.
func TestUnreadableRecordHaltsApply(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shard.db")
	f := mustShard(t, ShardConfig{Path: path})
	result(t, applyAt(t, f, 1, createLog(1, "first").Data))
	f.Close()
	withFile(t, path, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketLinks).Put([]byte("broken"), []byte{0xff, 0xff, 0xff})
	})
	f = mustShard(t, ShardConfig{Path: path})
	upd := &command.Update{Code: "broken", Now: t0, Patch: link.Patch{Title: new("x")}}
	logs := []*raft.Log{createLog(2, "before"), {Index: 3, Term: 1, Type: raft.LogCommand, Data: upd.Encode()}, createLog(4, "after")}
	done := make(chan []any, 1)
	go func() { done <- f.ApplyBatch(logs) }()
	testkit.WaitFor(t, 10*time.Second, "the halt", func() bool { return f.Halted() != nil })
	h := f.Halted()
	if h.Index != 3 || h.Type != command.TypeUpdate || !strings.Contains(h.Reason, `stored link "broken"`) || !strings.Contains(h.Reason, "repair-shard") {
		t.Fatalf("halt %+v", h)
	}
	if f.AppliedIndex() != 2 || f.Stalled() != nil {
		t.Fatalf("applied %d, stall %+v", f.AppliedIndex(), f.Stalled())
	}
	if _, err := f.Get("before"); err != nil {
		t.Fatalf("the entry before the halt: %v", err)
	}
	if _, err := f.Get("after"); !errors.Is(err, link.ErrNotFound) {
		t.Fatalf("an entry after the halt was applied: %v", err)
	}
	f.Release()
	<-done
}

// TestDamagedPageIsNamedAtOpen: a state file whose meta pages are sound
// but whose tree is damaged is refused at open with an error naming it
// (ErrCorrupt); bbolt alone panicked on a goroutine of its own while
// rebuilding the freelist, killing the process with no file named.
func TestDamagedPageIsNamedAtOpen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.db")
	f, err := NewShardFSM(ShardConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 400 {
		url := fmt.Sprintf("https://example.com/%d/%s", i, strings.Repeat("x", 200))
		applyAt(t, f, uint64(i+1), (&command.CreateIfAbsent{Code: fmt.Sprintf("c%04d", i), Now: t0, Nonce: uint64(i + 1), Request: link.CreateRequest{URL: url}}).Encode())
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := testkit.DamageBoltPages(path); err != nil {
		t.Fatal(err)
	}
	_, err = NewShardFSM(ShardConfig{Path: path})
	if !errors.Is(err, ErrCorrupt) || !errors.Is(err, boltcheck.ErrDamaged) || !strings.Contains(err.Error(), path) {
		t.Fatalf("open of a damaged file: %v", err)
	}
}
