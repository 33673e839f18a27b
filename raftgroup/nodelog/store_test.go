package nodelog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/linkraft/linkraft/internal/testkit"
)

func open(t *testing.T) *Store {
	t.Helper()
	s, err := Open(Config{Path: filepath.Join(t.TempDir(), "raft-log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func entries(from, to uint64, term uint64) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		e := &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: fmt.Appendf(nil, "entry %d", i)}
		if i%2 == 0 {
			e.Extensions = []byte{byte(i)}
			e.AppendedAt = time.Unix(1700000000, int64(i))
		}
		out = append(out, e)
	}
	return out
}

func sameLog(a, b *raft.Log) bool {
	return a.Index == b.Index && a.Term == b.Term && a.Type == b.Type && bytes.Equal(a.Data, b.Data) &&
		bytes.Equal(a.Extensions, b.Extensions) && a.AppendedAt.Equal(b.AppendedAt)
}

// checkLog fails unless store holds exactly want (contiguous, in order).
func checkLog(t *testing.T, store raft.LogStore, want []*raft.Log) {
	t.Helper()
	first, err := store.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	last, err := store.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 {
		if first != 0 || last != 0 {
			t.Fatalf("empty log has first %d last %d", first, last)
		}
		return
	}
	if first != want[0].Index || last != want[len(want)-1].Index {
		t.Fatalf("first %d last %d, want %d %d", first, last, want[0].Index, want[len(want)-1].Index)
	}
	for _, w := range want {
		var got raft.Log
		if err := store.GetLog(w.Index, &got); err != nil {
			t.Fatalf("entry %d: %v", w.Index, err)
		}
		if !sameLog(&got, w) {
			t.Fatalf("entry %d: %+v, want %+v", w.Index, got, *w)
		}
	}
}

// TestLogStoreContract: each group's view behaves as raft.LogStore and
// raft.StableStore ask (including raft's "not found" for a missing key),
// and groups do not see each other's entries or keys.
func TestLogStoreContract(t *testing.T) {
	t.Parallel()
	s := open(t)
	a, b := s.Log("meta"), s.Log("shards/0")
	checkLog(t, a, nil)
	var e raft.Log
	if err := a.GetLog(1, &e); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("missing entry: %v", err)
	}
	if _, err := a.GetUint64([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
		t.Fatalf("missing key: %v", err)
	}
	wantA := entries(1, 20, 2)
	if err := a.StoreLogs(wantA); err != nil {
		t.Fatal(err)
	}
	if err := b.StoreLog(entries(5, 5, 3)[0]); err != nil {
		t.Fatal(err)
	}
	checkLog(t, a, wantA)
	checkLog(t, b, entries(5, 5, 3))
	if err := a.DeleteRange(1, 8); err != nil {
		t.Fatal(err)
	}
	checkLog(t, a, wantA[8:])
	if err := a.DeleteRange(15, 100); err != nil {
		t.Fatal(err)
	}
	checkLog(t, a, wantA[8:14])
	if err := a.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if err := a.Set([]byte("LastVoteCand"), []byte("n2")); err != nil {
		t.Fatal(err)
	}
	if v, err := a.GetUint64([]byte("CurrentTerm")); err != nil || v != 7 {
		t.Fatalf("term %d, %v", v, err)
	}
	if v, err := a.Get([]byte("LastVoteCand")); err != nil || string(v) != "n2" {
		t.Fatalf("vote %q, %v", v, err)
	}
	if _, err := b.Get([]byte("LastVoteCand")); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("another group's key: %v", err)
	}
	if groups, err := s.Groups(); err != nil || len(groups) != 2 {
		t.Fatalf("groups %v, %v", groups, err)
	}
	if err := s.Drop("meta"); err != nil {
		t.Fatal(err)
	}
	checkLog(t, a, nil)
	checkLog(t, b, entries(5, 5, 3))
	if ok, err := s.Has("meta"); err != nil || ok {
		t.Fatalf("dropped group still held: %v %v", ok, err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.StoreLogs(wantA); !errors.Is(err, ErrClosed) {
		t.Fatalf("store on a closed view: %v", err)
	}
	if _, err := a.LastIndex(); !errors.Is(err, ErrClosed) {
		t.Fatalf("read on a closed view: %v", err)
	}
}

// TestWritesAreDurableAcrossReopen: what a write returned for is in the
// file when it is opened again.
func TestWritesAreDurableAcrossReopen(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "raft-log")
	s, err := Open(Config{Path: p})
	if err != nil {
		t.Fatal(err)
	}
	want := entries(3, 9, 1)
	if err := s.Log("meta").StoreLogs(want); err != nil {
		t.Fatal(err)
	}
	if err := s.Log("meta").SetUint64([]byte("CurrentTerm"), 4); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Log("meta").StoreLogs(want); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after Close: %v", err)
	}
	s, err = Open(Config{Path: p})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkLog(t, s.Log("meta"), want)
	if v, err := s.Log("meta").GetUint64([]byte("CurrentTerm")); err != nil || v != 4 {
		t.Fatalf("term %d, %v", v, err)
	}
}

// hook runs fn in the committer, in the next batch, and returns its error.
func (s *Store) hook(fn func() error) error { return s.do(&request{kind: opHook, hook: fn}) }

// hold makes the committer's next transaction wait until n more writes
// are queued behind it, so that the following commit holds all n: the
// group commit made deterministic. It returns once the holding write is
// in the committer's hands, and a channel that receives its result.
func hold(t *testing.T, s *Store, n int) chan error {
	t.Helper()
	taken := make(chan struct{})
	res := make(chan error, 1)
	go func() {
		res <- s.hook(func() error {
			close(taken)
			testkit.WaitFor(t, 10*time.Second, "writes queued", func() bool { return len(s.reqs) >= n })
			return nil
		})
	}()
	<-taken
	return res
}

// TestGroupCommit: writes of many groups queued during one commit go out
// together in the next, in one transaction, and each gets its answer.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	s := open(t)
	const groups = 8
	before, beforeWrites := s.Commits()
	held := hold(t, s, groups)
	var wg sync.WaitGroup
	errs := make([]error, groups)
	for g := range groups {
		wg.Go(func() { errs[g] = s.Log(fmt.Sprintf("shards/%d", g)).StoreLogs(entries(1, 4, 1)) })
	}
	wg.Wait()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	for g, err := range errs {
		if err != nil {
			t.Fatalf("group %d: %v", g, err)
		}
		checkLog(t, s.Log(fmt.Sprintf("shards/%d", g)), entries(1, 4, 1))
	}
	commits, writes := s.Commits()
	if commits-before != 1 || writes-beforeWrites != groups {
		t.Fatalf("%d syncs of %d writes for %d groups' appends queued behind a held batch, want 1 of %d", commits-before, writes-beforeWrites, groups, groups)
	}
}

// TestFailingWriteFailsAlone: a write that fails in a shared transaction
// gets its error; the others queued with it are committed.
func TestFailingWriteFailsAlone(t *testing.T) {
	t.Parallel()
	s := open(t)
	held := hold(t, s, 3)
	var wg sync.WaitGroup
	var good1, good2, bad error
	wg.Go(func() { good1 = s.Log("meta").StoreLogs(entries(1, 2, 1)) })
	wg.Go(func() { bad = s.hook(func() error { return errors.New("refused") }) })
	wg.Go(func() { good2 = s.Log("shards/2").StoreLogs(entries(1, 1, 1)) })
	wg.Wait()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if good1 != nil || good2 != nil || bad == nil {
		t.Fatalf("good %v %v, bad %v", good1, good2, bad)
	}
	checkLog(t, s.Log("meta"), entries(1, 2, 1))
	checkLog(t, s.Log("shards/2"), entries(1, 1, 1))
	if err := s.Log("meta").Set(nil, []byte("x")); err == nil {
		t.Fatal("an empty stable key was stored")
	}
}

// TestClosedViewWritesNothing: a write queued while its view was open
// fails with ErrClosed if the view closes before the commit reaches it, so
// a group dropped after its close does not come back, even when the drop
// was queued first.
func TestClosedViewWritesNothing(t *testing.T) {
	t.Parallel()
	s := open(t)
	l := s.Log("shards/3")
	if err := l.StoreLogs(entries(1, 1, 1)); err != nil {
		t.Fatal(err)
	}
	taken, release := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- s.hook(func() error { close(taken); <-release; return nil })
	}()
	<-taken
	dropped := make(chan error, 1)
	go func() { dropped <- s.Drop("shards/3") }()
	testkit.WaitFor(t, 10*time.Second, "the drop queued", func() bool { return len(s.reqs) == 1 })
	res := make(chan error, 1)
	go func() { res <- l.StoreLogs(entries(2, 2, 1)) }()
	testkit.WaitFor(t, 10*time.Second, "the write queued behind it", func() bool { return len(s.reqs) == 2 })
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if err := <-dropped; err != nil {
		t.Fatal(err)
	}
	if err := <-res; !errors.Is(err, ErrClosed) {
		t.Fatalf("a write queued before Close: %v", err)
	}
	if ok, err := s.Has("shards/3"); err != nil || ok {
		t.Fatalf("the dropped group came back: %v %v", ok, err)
	}
}

// TestDamagedEntryIsAnError: an entry whose bytes do not decode is an
// error naming it, never a panic or a short entry.
func TestDamagedEntryIsAnError(t *testing.T) {
	t.Parallel()
	good := encodeLog(entries(2, 2, 5)[0])
	for _, v := range [][]byte{nil, good[:5], good[:len(good)-1], append(append([]byte(nil), good...), 0), append([]byte{9}, good[1:]...)} {
		var e raft.Log
		if err := decodeLog(v, &e); !errors.Is(err, errCorrupt) {
			t.Fatalf("%x decoded: %v", v, err)
		}
	}
	var e raft.Log
	if err := decodeLog(good, &e); err != nil || !bytes.Equal(e.Data, []byte("entry 2")) {
		t.Fatalf("%+v, %v", e, err)
	}
}

// TestImportExport: a group's own raft-boltdb file moves into the shared
// log whole (entries and stable keys) and is removed; exported, it comes
// back as a raft-boltdb file with the same contents, and leaves the shared
// log.
func TestImportExport(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	own := filepath.Join(dir, "raft.db")
	src, err := raftboltdb.New(raftboltdb.Options{Path: own})
	if err != nil {
		t.Fatal(err)
	}
	want := entries(10, 40, 3)
	if err := src.StoreLogs(want); err != nil {
		t.Fatal(err)
	}
	if err := src.SetUint64([]byte("CurrentTerm"), 3); err != nil {
		t.Fatal(err)
	}
	if err := src.Set([]byte("LastVoteCand"), []byte("n3")); err != nil {
		t.Fatal(err)
	}
	src.Close()
	s := open(t)
	// Whatever the shared log held for the group is replaced.
	if err := s.Log("shards/4").StoreLogs(entries(1, 50, 9)); err != nil {
		t.Fatal(err)
	}
	if err := s.Import("shards/4", own); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(own); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("imported file still there: %v", err)
	}
	l := s.Log("shards/4")
	checkLog(t, l, want)
	if v, err := l.GetUint64([]byte("CurrentTerm")); err != nil || v != 3 {
		t.Fatalf("term %d, %v", v, err)
	}
	if _, err := l.Get([]byte("LastVoteTerm")); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("a key the file did not have: %v", err)
	}
	if err := s.Import("shards/4", own); err != nil {
		t.Fatalf("import of a missing file: %v", err)
	}
	if err := s.Export("shards/4", own); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Has("shards/4"); err != nil || ok {
		t.Fatalf("exported group still in the shared log: %v %v", ok, err)
	}
	back, err := raftboltdb.New(raftboltdb.Options{Path: own})
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	checkLog(t, back, want)
	if v, err := back.Get([]byte("LastVoteCand")); err != nil || string(v) != "n3" {
		t.Fatalf("vote %q, %v", v, err)
	}
	if err := s.Export("shards/4", filepath.Join(dir, "again.db")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "again.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("export of a group not held wrote a file: %v", err)
	}
}

// TestSecondOpenWaits: a log held by a running node is not opened twice;
// the wait is bounded and the error says so.
func TestSecondOpenWaits(t *testing.T) {
	t.Parallel()
	s := open(t)
	if _, err := Open(Config{Path: s.Path(), Timeout: 50 * time.Millisecond}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v", err)
	}
}

// FuzzDecodeLog: any bytes (a damaged file) decode to an entry or an
// error, never a panic; an entry that decodes encodes to bytes that decode
// to the same entry (a length written with redundant varint bytes is the
// one way two encodings of an entry differ).
// Its seeds run with the package's tests; the test loop does not fuzz it
// (its time is spent on what the network feeds the node): go test -run '^$'
// -fuzz FuzzDecodeLog -fuzztime 100000x ./raftgroup/nodelog
func FuzzDecodeLog(f *testing.F) {
	for _, e := range entries(1, 4, 3) {
		f.Add(encodeLog(e))
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, v []byte) {
		var e, again raft.Log
		if err := decodeLog(v, &e); err != nil {
			return
		}
		if err := decodeLog(encodeLog(&e), &again); err != nil || !sameLog(&e, &again) {
			t.Fatalf("%x decoded to %+v; encoded and decoded again: %+v, %v", v, e, again, err)
		}
	})
}
