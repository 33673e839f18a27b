package fsm

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/testkit"
	"github.com/linkraft/linkraft/link"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func mustShard(tb testing.TB, cfg ShardConfig) *ShardFSM {
	tb.Helper()
	if cfg.Path == "" {
		cfg.Path = filepath.Join(tb.TempDir(), "shard.db")
	}
	f, err := NewShardFSM(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	return f
}

// applyAt applies one command entry at index and returns its Result.
func applyAt(tb testing.TB, f interface{ Apply(*raft.Log) any }, index uint64, data []byte) any {
	tb.Helper()
	return f.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data})
}

func result(tb testing.TB, v any) *command.LinkResult {
	tb.Helper()
	r, ok := v.(*command.LinkResult)
	if !ok {
		tb.Fatalf("response %T, want *command.LinkResult", v)
	}
	return r
}

func TestCreateUpdateDeleteState(t *testing.T) {
	var changes []string
	f := mustShard(t, ShardConfig{OnChange: func(l *link.Link) { changes = append(changes, l.Code) }})

	create := &command.CreateIfAbsent{Code: "abc", Now: t0, Nonce: 42, Request: link.CreateRequest{URL: "https://example.com/a", Owner: "o1", ExpiresAt: t0.Add(time.Hour), Redirect: 301, MaxVisits: 5, Tags: []string{"x", "y"}}}
	r := result(t, applyAt(t, f, 1, create.Encode()))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	want := &link.Link{Code: "abc", URL: "https://example.com/a", Owner: "o1", CreatedAt: t0, UpdatedAt: t0,
		ExpiresAt: t0.Add(time.Hour), Redirect: 301, MaxVisits: 5, Tags: []string{"x", "y"}, Nonce: 42, Version: 1}
	got, err := f.Get("abc")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("after create (-want +got):\n%s", d)
	}

	// Same code, other nonce: taken. Same nonce: the retry gets the link.
	r = result(t, applyAt(t, f, 2, (&command.CreateIfAbsent{Code: "abc", Now: t0, Nonce: 7, Request: link.CreateRequest{URL: "https://other.example"}}).Encode()))
	if !errors.Is(r.Err, link.ErrAliasTaken) {
		t.Fatalf("duplicate create err = %v", r.Err)
	}
	r = result(t, applyAt(t, f, 3, create.Encode()))
	if r.Err != nil || r.Link.Version != 1 {
		t.Fatalf("retried create = %+v", r)
	}

	t1 := t0.Add(time.Minute)
	upd := &command.Update{Code: "abc", Now: t1, Patch: link.Patch{URL: new("https://example.com/b"), ExpiresAt: new(time.Time{}), Redirect: new(307), Disabled: new(true), Tags: new([]string(nil))}}
	r = result(t, applyAt(t, f, 4, upd.Encode()))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	got, _ = f.Get("abc")
	want.URL, want.ExpiresAt, want.Redirect, want.Disabled, want.Tags = "https://example.com/b", time.Time{}, 307, true, nil
	want.UpdatedAt, want.Version = t1, 4
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("after update (-want +got):\n%s", d)
	}

	// A partial update leaves other fields alone.
	r = result(t, applyAt(t, f, 5, (&command.Update{Code: "abc", Now: t1, Patch: link.Patch{Disabled: new(false)}}).Encode()))
	if r.Err != nil || r.Link.Disabled || r.Link.URL != "https://example.com/b" || r.Link.Redirect != 307 {
		t.Fatalf("partial update = %+v", r.Link)
	}

	r = result(t, applyAt(t, f, 6, (&command.Delete{Code: "abc", Now: t1}).Encode()))
	if r.Err != nil || !r.Link.Deleted {
		t.Fatalf("delete = %+v", r)
	}
	got, _ = f.Get("abc")
	if !got.Deleted || got.URL != "" || got.Version != 6 {
		t.Fatalf("tombstone = %+v", got)
	}
	// Tombstone: no update, no second delete, no re-create.
	for i, cmd := range [][]byte{upd.Encode(), (&command.Delete{Code: "abc", Now: t1}).Encode()} {
		if r := result(t, applyAt(t, f, uint64(7+i), cmd)); !errors.Is(r.Err, link.ErrDeleted) {
			t.Fatalf("command %d on tombstone: err = %v, want ErrDeleted", i, r.Err)
		}
	}
	other := &command.CreateIfAbsent{Code: "abc", Now: t1, Nonce: 43, Request: link.CreateRequest{URL: "https://example.com/new"}}
	if r := result(t, applyAt(t, f, 9, other.Encode())); !errors.Is(r.Err, link.ErrAliasTaken) {
		t.Fatalf("re-create of tombstone: err = %v", r.Err)
	}
	// The original creator's late retry learns that its create took effect
	// (it was deleted since), not "taken": that answer would be a lie.
	if r := result(t, applyAt(t, f, 10, create.Encode())); r.Err != nil || !r.Link.Deleted {
		t.Fatalf("late retry of the deleted create = %+v", r)
	}
	if got, _ := f.Get("abc"); !got.Deleted || got.Version != 6 {
		t.Fatalf("tombstone after late retry = %+v", got)
	}
	// Unknown codes.
	if r := result(t, applyAt(t, f, 11, (&command.Update{Code: "nope", Now: t1, Patch: link.Patch{URL: new("https://x.example")}}).Encode())); !errors.Is(r.Err, link.ErrNotFound) {
		t.Fatalf("update unknown: %v", r.Err)
	}
	if _, err := f.Get("nope"); !errors.Is(err, link.ErrNotFound) {
		t.Fatalf("Get unknown: %v", err)
	}
	if f.AppliedIndex() != 11 {
		t.Fatalf("applied = %d", f.AppliedIndex())
	}
	if d := cmp.Diff([]string{"abc", "abc", "abc", "abc"}, changes); d != "" {
		t.Fatalf("OnChange calls (-want +got):\n%s", d)
	}
}

func TestReplayIsSkippedAfterReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	f, err := NewShardFSM(ShardConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	logs := []*raft.Log{
		{Index: 1, Type: raft.LogConfiguration},
		{Index: 2, Type: raft.LogCommand, Data: (&command.CreateIfAbsent{Code: "aaa", Now: t0, Request: link.CreateRequest{URL: "https://a.example"}}).Encode()},
		{Index: 3, Type: raft.LogCommand, Data: (&command.Update{Code: "aaa", Now: t0, Patch: link.Patch{URL: new("https://b.example")}}).Encode()},
	}
	f.ApplyBatch(logs)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f, err = NewShardFSM(ShardConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.AppliedIndex() != 3 {
		t.Fatalf("applied after reopen = %d", f.AppliedIndex())
	}
	// Raft replays 1..3 and then a new entry 4. Replaying index 2 again
	// would answer "alias taken" and index 3 would re-run; both must be
	// skipped (nil response), and 4 applied.
	out := f.ApplyBatch(append(logs, &raft.Log{Index: 4, Type: raft.LogCommand,
		Data: (&command.Update{Code: "aaa", Now: t0, Patch: link.Patch{Redirect: new(308)}}).Encode()}))
	for i := 0; i < 3; i++ {
		if out[i] != nil {
			t.Fatalf("replayed entry %d answered %v", i+1, out[i])
		}
	}
	if r := result(t, out[3]); r.Err != nil || r.Link.Redirect != 308 || r.Link.URL != "https://b.example" {
		t.Fatalf("entry 4 = %+v", r)
	}
}

type memSink struct {
	bytes.Buffer
	cancelled, closed bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Close() error  { s.closed = true; return nil }

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	src := mustShard(t, ShardConfig{})
	for i, code := range []string{"a01", "a02", "a03"} {
		applyAt(t, src, uint64(i+1), (&command.CreateIfAbsent{Code: code, Now: t0, Request: link.CreateRequest{URL: "https://example.com/" + code}}).Encode())
	}
	snap, err := src.StateSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	// Writes after Snapshot() must not leak into the persisted snapshot.
	applyAt(t, src, 4, (&command.CreateIfAbsent{Code: "late", Now: t0, Request: link.CreateRequest{URL: "https://late.example"}}).Encode())
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	if !sink.closed || sink.cancelled {
		t.Fatalf("sink closed=%v cancelled=%v", sink.closed, sink.cancelled)
	}

	restored := false
	dst := mustShard(t, ShardConfig{OnRestore: func() { restored = true }})
	applyAt(t, dst, 1, (&command.CreateIfAbsent{Code: "old", Now: t0, Request: link.CreateRequest{URL: "https://old.example"}}).Encode())
	if err := dst.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if !restored {
		t.Fatal("OnRestore not called")
	}
	if dst.AppliedIndex() != 3 {
		t.Fatalf("applied after restore = %d, want 3", dst.AppliedIndex())
	}
	for _, code := range []string{"a01", "a02", "a03"} {
		l, err := dst.Get(code)
		if err != nil || l.URL != "https://example.com/"+code {
			t.Fatalf("restored %s = %+v, %v", code, l, err)
		}
	}
	for _, code := range []string{"late", "old"} {
		if _, err := dst.Get(code); !errors.Is(err, link.ErrNotFound) {
			t.Fatalf("%s present after restore: %v", code, err)
		}
	}
	// The restored FSM keeps applying.
	if r := result(t, applyAt(t, dst, 4, (&command.CreateIfAbsent{Code: "a04", Now: t0, Request: link.CreateRequest{URL: "https://x.example"}}).Encode())); r.Err != nil {
		t.Fatal(r.Err)
	}
	// Garbage is refused and the state stays.
	if err := dst.Restore(io.NopCloser(bytes.NewReader([]byte("not a bbolt file at all")))); err == nil {
		t.Fatal("garbage snapshot accepted")
	}
	if _, err := dst.Get("a04"); err != nil {
		t.Fatalf("state lost after a refused restore: %v", err)
	}
}

// TestBadEntriesAreRejectedNotFatal: entries that fail to decode or
// validate (the poison pill among them: a 5-byte click batch) are answered
// with a Rejection, change nothing, and advance the applied index, so that
// every replica moves past them alike.
func TestBadEntriesAreRejectedNotFatal(t *testing.T) {
	cases := map[string][]byte{
		"empty":                {},
		"truncated field":      {byte(command.TypeCreateIfAbsent), 0x0a, 0x05, 'a'},
		"create no code":       {byte(command.TypeCreateIfAbsent)},
		"wrong wire type":      {byte(command.TypeDelete), 0x08, 0x01},
		"poison click batch":   {byte(command.TypeClickBatch), 0xff, 0xff, 0xff, 0xff},
		"javascript url":       (&command.CreateIfAbsent{Code: "evil", Request: link.CreateRequest{URL: "javascript:alert(document.cookie)"}}).Encode(),
		"crlf url":             (&command.CreateIfAbsent{Code: "evil", Request: link.CreateRequest{URL: "https://a.example/\r\nSet-Cookie:x"}}).Encode(),
		"bad code":             (&command.CreateIfAbsent{Code: "../etc", Request: link.CreateRequest{URL: "https://a.example/"}}).Encode(),
		"bad redirect":         (&command.CreateIfAbsent{Code: "evil", Request: link.CreateRequest{URL: "https://a.example/", Redirect: 200}}).Encode(),
		"meta command":         (&command.LeaseRange{Node: "n1", N: 10}).Encode(),
		"NUL in an owner":      (&command.CreateIfAbsent{Code: "evil", Request: link.CreateRequest{URL: "https://a.example/", Owner: "alice\x00zz"}}).Encode(),
		"plaintext password":   (&command.CreateIfAbsent{Code: "evil", Request: link.CreateRequest{URL: "https://a.example/", PasswordHash: "hunter2"}}).Encode(),
		"4 GiB argon2 cost":    (&command.Update{Code: "evil", Patch: link.Patch{PasswordHash: new("$argon2id$v=19$m=4194304,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")}}).Encode(),
		"batch with a bad one": (&command.CreateBatch{Creates: []command.CreateIfAbsent{{Code: "fine", Request: link.CreateRequest{URL: "https://a.example/"}}, {Code: "evil", Request: link.CreateRequest{URL: "ftp://a.example/"}}}}).Encode(),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			f := mustShard(t, ShardConfig{})
			before, err := f.Digest()
			if err != nil {
				t.Fatal(err)
			}
			out := applyAt(t, f, 1, data)
			rej, ok := out.(*command.Rejection)
			if !ok || !errors.Is(rej, command.ErrRejected) || rej.Index != 1 {
				t.Fatalf("response %T %v, want a *Rejection at index 1", out, out)
			}
			if f.AppliedIndex() != 1 || f.Rejected() != 1 {
				t.Fatalf("applied %d, rejected %d", f.AppliedIndex(), f.Rejected())
			}
			after, err := f.Digest()
			if err != nil {
				t.Fatal(err)
			}
			if after.Sum != before.Sum || after.Items != before.Items {
				t.Fatal("a rejected entry changed the state")
			}
			if err := command.Check(command.GroupShard, data); !errors.Is(err, command.ErrRejected) {
				t.Fatalf("Check = %v, want command.ErrRejected (the leader refuses it too)", err)
			}
			// The next good entry applies.
			result(t, applyAt(t, f, 2, (&command.CreateIfAbsent{Code: "good", Request: link.CreateRequest{URL: "https://ok.example/"}}).Encode()))
		})
	}
	// An unknown type with the ignore flag is skipped, not fatal.
	f := mustShard(t, ShardConfig{})
	if out := applyAt(t, f, 1, []byte{byte(command.IgnoreUnknownFlag | 5), 1}); out != nil {
		t.Fatalf("ignorable entry answered %v", out)
	}
	if f.AppliedIndex() != 1 {
		t.Fatal("ignorable entry did not advance the applied index")
	}
}

// TestUnknownTypeHaltsUntilRelease: an entry of a type this version does
// not know (a newer version wrote it) stops apply there: the entries before
// it in the batch are applied, the call waits until Release, nothing after
// it is applied, no snapshot is taken, and a reopened file starts before it.
func TestUnknownTypeHaltsUntilRelease(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	f, err := NewShardFSM(ShardConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	logs := []*raft.Log{
		{Index: 1, Type: raft.LogCommand, Data: (&command.CreateIfAbsent{Code: "before", Request: link.CreateRequest{URL: "https://a.example/"}}).Encode()},
		{Index: 2, Type: raft.LogCommand, Data: []byte{99, 1, 2, 3}},
		{Index: 3, Type: raft.LogCommand, Data: (&command.CreateIfAbsent{Code: "after", Request: link.CreateRequest{URL: "https://a.example/"}}).Encode()},
	}
	done := make(chan []any, 1)
	go func() { done <- f.ApplyBatch(logs) }()
	testkit.WaitFor(t, 5*time.Second, "apply to report the halt", func() bool { return f.Halted() != nil })
	if h := f.Halted(); h.Index != 2 || h.Type != 99 {
		t.Fatalf("halt %+v", h)
	}
	select {
	case <-done:
		t.Fatal("apply returned past an unknown type before Release")
	default:
	}
	if _, err := f.Get("before"); err != nil {
		t.Fatalf("the entry before the halt: %v", err)
	}
	if _, err := f.Snapshot(); !errors.Is(err, ErrNotApplying) {
		t.Fatalf("snapshot while halted: %v", err)
	}
	f.Release()
	<-done
	// Later batches apply nothing.
	f.ApplyBatch([]*raft.Log{{Index: 4, Type: raft.LogCommand, Data: (&command.CreateIfAbsent{Code: "later", Request: link.CreateRequest{URL: "https://a.example/"}}).Encode()}})
	if f.AppliedIndex() != 1 {
		t.Fatalf("applied index %d after a halt at 2", f.AppliedIndex())
	}
	f.Close()
	g, err := NewShardFSM(ShardConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.AppliedIndex() != 1 {
		t.Fatalf("reopened at %d, want 1 (replay resumes at the unknown entry)", g.AppliedIndex())
	}
	for _, code := range []string{"after", "later"} {
		if _, err := g.Get(code); !errors.Is(err, link.ErrNotFound) {
			t.Fatalf("%s applied past the halt: %v", code, err)
		}
	}
}

func TestMetaSettingsAndLeases(t *testing.T) {
	m, err := NewMetaFSM(MetaConfig{Path: filepath.Join(t.TempDir(), "meta.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if s, _ := m.Settings(); s != nil {
		t.Fatalf("settings before bootstrap: %+v", s)
	}
	set := command.Settings{ClusterID: "c1", Shards: 8, PartitionCount: 271, ReplicationFactor: 3, Load: 1.25,
		CodeMode: "permuted", CodeKey: []byte("0123456789abcdef"), CreatedAt: t0, RingVNodes: 20, RingHasher: "xxhash64"}
	r := applyAt(t, m, 1, (&command.SetSettings{Settings: set}).Encode()).(*command.SettingsResult)
	if d := cmp.Diff(&set, r.Settings); d != "" {
		t.Fatal(d)
	}
	// A second command.SetSettings does not overwrite: bootstrap settings are fixed.
	other := set
	other.Shards = 16
	r = applyAt(t, m, 2, (&command.SetSettings{Settings: other}).Encode()).(*command.SettingsResult)
	if r.Settings.Shards != 8 {
		t.Fatalf("settings overwritten: %+v", r.Settings)
	}
	got, _ := m.Settings()
	if d := cmp.Diff(&set, got); d != "" {
		t.Fatal(d)
	}

	var prevEnd uint64
	for i := uint64(0); i < 5; i++ {
		lr := applyAt(t, m, 3+i, (&command.LeaseRange{Node: "n1", N: 100}).Encode()).(*command.LeaseResult)
		if lr.Err != nil || lr.Start != prevEnd || lr.End != lr.Start+100 {
			t.Fatalf("lease %d = %+v", i, lr)
		}
		prevEnd = lr.End
	}
	if lr := applyAt(t, m, 8, (&command.LeaseRange{Node: "n1", N: 0}).Encode()).(*command.LeaseResult); lr.Err == nil {
		t.Fatal("empty lease accepted")
	}
	if next, _ := m.NextID(); next != 500 {
		t.Fatalf("next id = %d", next)
	}
}

// TestRestoreWhileSnapshotOpen: raft may stream a snapshot while a restore
// arrives. Restore must not wait for that snapshot, and the snapshot must
// still stream the state it was taken from.
func TestRestoreWhileSnapshotOpen(t *testing.T) {
	src := mustShard(t, ShardConfig{})
	applyAt(t, src, 1, (&command.CreateIfAbsent{Code: "new", Now: t0, Request: link.CreateRequest{URL: "https://new.example"}}).Encode())
	newSnap, _ := src.StateSnapshot()
	newSink := &memSink{}
	if err := newSnap.Persist(newSink); err != nil {
		t.Fatal(err)
	}
	newSnap.Release()

	dst := mustShard(t, ShardConfig{})
	applyAt(t, dst, 1, (&command.CreateIfAbsent{Code: "old", Now: t0, Request: link.CreateRequest{URL: "https://old.example"}}).Encode())
	held, err := dst.StateSnapshot() // not released until after the restore
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- dst.Restore(io.NopCloser(bytes.NewReader(newSink.Bytes()))) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Restore blocked behind an open snapshot")
	}
	if _, err := dst.Get("new"); err != nil {
		t.Fatalf("restored state missing: %v", err)
	}
	// The held snapshot still streams the pre-restore file.
	sink := &memSink{}
	if err := held.Persist(sink); err != nil {
		t.Fatal(err)
	}
	held.Release()
	check := mustShard(t, ShardConfig{})
	if err := check.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if _, err := check.Get("old"); err != nil {
		t.Fatalf("held snapshot lost its state: %v", err)
	}
	if _, err := check.Get("new"); !errors.Is(err, link.ErrNotFound) {
		t.Fatalf("held snapshot saw the restore: %v", err)
	}
}

func TestMetaPlacementCompareAndSet(t *testing.T) {
	m, err := NewMetaFSM(MetaConfig{Path: filepath.Join(t.TempDir(), "meta.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	p1 := command.Placement{Version: 1, Shards: [][]string{{"n1", "n2", "n3"}, {"n2", "n3", "n1"}}}
	r := applyAt(t, m, 1, (&command.SetPlacement{Placement: p1}).Encode()).(*command.PlacementResult)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	// A proposal based on an old version loses.
	r = applyAt(t, m, 2, (&command.SetPlacement{Placement: command.Placement{Version: 1, Shards: [][]string{{"x"}}}}).Encode()).(*command.PlacementResult)
	if !errors.Is(r.Err, command.ErrStalePlacement) || r.Placement.Version != 1 {
		t.Fatalf("stale placement: %+v", r)
	}
	p2 := command.Placement{Version: 2, Shards: [][]string{{"n1", "n2", "n3", "n4"}, {"n2", "n3", "n1", "n4"}}}
	if r = applyAt(t, m, 3, (&command.SetPlacement{Placement: p2}).Encode()).(*command.PlacementResult); r.Err != nil {
		t.Fatal(r.Err)
	}
	got, err := m.Placement()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(&p2, got); d != "" {
		t.Fatal(d)
	}
}

// TestLiveSnapshotIsAMarkerAndOpenStateStreamsTheFile: what raft persists
// holds no state (and cannot be restored from), while OpenState streams the
// live file, exactly as many bytes as it announces, that restores to the
// same links.
func TestLiveSnapshotIsAMarkerAndOpenStateStreamsTheFile(t *testing.T) {
	src := mustShard(t, ShardConfig{})
	for i, code := range []string{"b01", "b02"} {
		applyAt(t, src, uint64(i+1), (&command.CreateIfAbsent{Code: code, Now: t0, Request: link.CreateRequest{URL: "https://example.com/" + code}}).Encode())
	}
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	if !strings.HasPrefix(sink.String(), LiveStateMarker) || sink.Len() != len(LiveStateMarker)+8 {
		t.Fatalf("persisted %q", sink.Bytes())
	}
	dst := mustShard(t, ShardConfig{})
	applyAt(t, dst, 1, (&command.CreateIfAbsent{Code: "keep", Now: t0, Request: link.CreateRequest{URL: "https://keep.example"}}).Encode())
	if err := dst.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); !errors.Is(err, ErrLiveMarker) {
		t.Fatalf("restore from a marker: %v", err)
	}
	if _, err := dst.Get("keep"); err != nil {
		t.Fatalf("a refused marker lost the state: %v", err)
	}

	// A write after OpenState is not in the stream: it is a point in time.
	size, rc, err := src.OpenState()
	if err != nil {
		t.Fatal(err)
	}
	applyAt(t, src, 3, (&command.CreateIfAbsent{Code: "late", Now: t0, Request: link.CreateRequest{URL: "https://late.example"}}).Encode())
	data, err := io.ReadAll(rc)
	if err != nil || int64(len(data)) != size {
		t.Fatalf("streamed %d bytes of %d: %v", len(data), size, err)
	}
	// While the copy is out, raft may not snapshot (and so compact the log
	// the follower needs after it); the copy leaves no file behind.
	if _, err := src.Snapshot(); !errors.Is(err, ErrSendInProgress) {
		t.Fatalf("snapshot during a send: %v", err)
	}
	if left, _ := filepath.Glob(src.path + ".send-*"); len(left) != 0 {
		t.Fatalf("send copies on disk: %v", left)
	}
	rc.Close()
	if snap, err := src.Snapshot(); err != nil {
		t.Fatalf("snapshot after the send: %v", err)
	} else {
		snap.Release()
	}
	if err := dst.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	if dst.AppliedIndex() != 2 {
		t.Fatalf("applied after restore = %d", dst.AppliedIndex())
	}
	for _, code := range []string{"b01", "b02"} {
		if _, err := dst.Get(code); err != nil {
			t.Fatalf("%s: %v", code, err)
		}
	}
	for _, code := range []string{"late", "keep"} {
		if _, err := dst.Get(code); !errors.Is(err, link.ErrNotFound) {
			t.Fatalf("%s present: %v", code, err)
		}
	}
	// A reader closed early frees the view: Close must not hang on it.
	_, rc, err = src.OpenState()
	if err != nil {
		t.Fatal(err)
	}
	rc.Close()
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestPutLinkWritesTheRecordForm: what the shard stores is the link's
// record form (command.EncodeRecord), not its wire form.
func TestPutLinkWritesTheRecordForm(t *testing.T) {
	plain := &link.Link{Code: "abc123", URL: "https://www.example.com/articles/2026/11/some-article-00000001",
		CreatedAt: t0, UpdatedAt: t0, Redirect: link.DefaultRedirect, Nonce: 0xfeedfacecafebeef, Version: 77}
	f := mustShard(t, ShardConfig{})
	applyAt(t, f, 1, (&command.CreateIfAbsent{Code: plain.Code, Now: t0, Nonce: plain.Nonce, Request: link.CreateRequest{URL: plain.URL}}).Encode())
	err := f.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketLinks).Get([]byte(plain.Code))
		l, err := getLink(tx, plain.Code)
		if err != nil {
			return err
		}
		if want := command.EncodeRecord(l); !bytes.Equal(v, want) {
			t.Fatalf("stored %x, want the lean form %x", v, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
