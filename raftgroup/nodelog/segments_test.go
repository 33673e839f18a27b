package nodelog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// model is what a group's log should hold.
type model struct {
	ents   []*raft.Log
	stable map[string][]byte
}

func (m *model) last() uint64 {
	if len(m.ents) == 0 {
		return 0
	}
	return m.ents[len(m.ents)-1].Index
}

// checkModel fails unless s holds exactly what the models say.
func checkModel(t *testing.T, s *Store, models map[string]*model, when string) {
	t.Helper()
	names, err := s.Groups()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for name := range models {
		want = append(want, name)
	}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("%s: groups %v, want %v", when, names, want)
	}
	for name, m := range models {
		l := s.Log(name)
		checkLog(t, l, m.ents)
		for k, v := range m.stable {
			got, err := l.Get([]byte(k))
			if err != nil || !bytes.Equal(got, v) {
				t.Fatalf("%s: group %s key %s: %q %v, want %q", when, name, k, got, err, v)
			}
		}
	}
}

// TestSegmentsAgainstAModel drives the log through random appends,
// compactions, conflicting suffixes, gaps, votes and drops in many groups,
// with segments small enough that it rotates, deletes and carries entries
// forward all along; after every step the log holds what a model of it
// holds, and after every reopen too (the records read back give what
// memory held). An idle group's few entries are carried forward, not kept
// in ever more segments.
func TestSegmentsAgainstAModel(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "raft-log")
	openIt := func() *Store {
		s, err := Open(Config{Path: dir, SegmentSize: segSize})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := openIt()
	defer func() { _ = s.Close() }()
	rng := rand.New(rand.NewPCG(1, 2))
	models := map[string]*model{}
	names := []string{"meta", "shards/0", "shards/1", "shards/2", "shards/3"}
	term := uint64(1)
	mk := func(from, n uint64) []*raft.Log {
		var out []*raft.Log
		for i := from; i < from+n; i++ {
			out = append(out, &raft.Log{Index: i, Term: term, Type: raft.LogCommand,
				Data: bytes.Repeat([]byte{byte(i)}, 20+rng.IntN(120))})
		}
		return out
	}
	// The idle group: a few entries and a vote, never touched again.
	metaEnts := mk(1, 5)
	if err := s.Log("meta").StoreLogs(metaEnts); err != nil {
		t.Fatal(err)
	}
	if err := s.Log("meta").SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	models["meta"] = &model{ents: metaEnts, stable: map[string][]byte{"CurrentTerm": {0, 0, 0, 0, 0, 0, 0, 7}}}
	checkLog(t, s.Log("meta"), models["meta"].ents)
	maxSegs := 0
	for step := range 3000 {
		name := names[1+rng.IntN(len(names)-1)]
		m := models[name]
		if m == nil {
			m = &model{stable: map[string][]byte{}}
		}
		l := s.Log(name)
		switch op := rng.IntN(100); {
		case op < 55: // append
			ents := mk(m.last()+1, uint64(1+rng.IntN(4)))
			if err := l.StoreLogs(ents); err != nil {
				t.Fatal(err)
			}
			m.ents = append(m.ents, ents...)
		case op < 70: // compaction: a prefix goes
			if len(m.ents) < 4 {
				continue
			}
			k := rng.IntN(len(m.ents) - 2)
			if err := l.DeleteRange(m.ents[0].Index, m.ents[k].Index); err != nil {
				t.Fatal(err)
			}
			m.ents = m.ents[k+1:]
		case op < 78: // a follower's conflict: a suffix replaced
			if len(m.ents) < 2 {
				continue
			}
			k := 1 + rng.IntN(len(m.ents)-1)
			term++
			ents := mk(m.ents[k].Index, uint64(1+rng.IntN(3)))
			if rng.IntN(2) == 0 {
				if err := l.DeleteRange(m.ents[k].Index, m.last()); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.StoreLogs(ents); err != nil {
				t.Fatal(err)
			}
			m.ents = append(m.ents[:k], ents...)
		case op < 82: // a snapshot installed: the log starts again past a gap
			ents := mk(m.last()+10, 2)
			if err := l.StoreLogs(ents); err != nil {
				t.Fatal(err)
			}
			m.ents = ents
		case op < 96: // a vote
			v := fmt.Appendf(nil, "n%d", step)
			if err := l.Set([]byte("LastVoteCand"), v); err != nil {
				t.Fatal(err)
			}
			m.stable["LastVoteCand"] = v
		case op < 98: // the group leaves the node
			if err := s.Drop(name); err != nil {
				t.Fatal(err)
			}
			delete(models, name)
			continue
		default: // the node restarts
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openIt()
			checkModel(t, s, models, fmt.Sprintf("after the restart at step %d", step))
			continue
		}
		models[name] = m
		if step%50 == 0 {
			checkModel(t, s, models, fmt.Sprintf("step %d", step))
		}
		n, _ := s.Segments()
		maxSegs = max(maxSegs, n)
	}
	checkModel(t, s, models, "the end")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openIt()
	checkModel(t, s, models, "the last reopen")
	// The idle group's entries were carried: without that, the first
	// segment and every one after it would stay.
	files, err := segmentFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if files[0] == 1 || maxSegs > 12 {
		t.Fatalf("segments %v, at most %d at once: the idle group's entries kept the old ones", files, maxSegs)
	}
}

// segSize is the segment size of openSmall's logs: a few entries
// fill one.
const segSize = 4 << 10

// openSmall opens a log of small segments for a test.
func openSmall(t *testing.T) *Store {
	t.Helper()
	s, err := Open(Config{Path: filepath.Join(t.TempDir(), "raft-log"), SegmentSize: segSize})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// lastSegment is the path of dir's newest segment.
func lastSegment(t testing.TB, dir string) string {
	t.Helper()
	seqs, err := segmentFiles(dir)
	if err != nil || len(seqs) == 0 {
		t.Fatalf("segments %v: %v", seqs, err)
	}
	return filepath.Join(dir, segmentName(seqs[len(seqs)-1]))
}

// TestTornTailIsCutOff: a record that a crash cut short at the end of the
// last segment was never acknowledged: the log opens without it, with
// everything before it, and what is written next survives the next start
// (nothing of the torn record is read back after it).
func TestTornTailIsCutOff(t *testing.T) {
	t.Parallel()
	for _, cut := range []string{"half a record", "a bad checksum", "garbage after the last"} {
		t.Run(cut, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "raft-log")
			s, err := Open(Config{Path: dir})
			if err != nil {
				t.Fatal(err)
			}
			l := s.Log("shards/1")
			if err := l.StoreLogs(entries(1, 10, 1)); err != nil {
				t.Fatal(err)
			}
			if err := l.StoreLogs(entries(11, 12, 1)); err != nil {
				t.Fatal(err)
			}
			p := lastSegment(t, dir)
			size := s.active().size
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			want := entries(1, 12, 1)
			switch cut {
			case "half a record":
				data = data[:size-5]
				want = entries(1, 10, 1)
			case "a bad checksum":
				data[size-3] ^= 0xff
				want = entries(1, 10, 1)
			case "garbage after the last":
				data = append(data[:size], []byte("\x00\x00\x00\x01\x00\x00\x00\x10Ezzzz")...)
			}
			if err := os.WriteFile(p, data, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err = Open(Config{Path: dir})
			if err != nil {
				t.Fatal(err)
			}
			checkLog(t, s.Log("shards/1"), want)
			more := entries(uint64(len(want))+1, 20, 2)
			if err := s.Log("shards/1").StoreLogs(more); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s, err = Open(Config{Path: dir})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			checkLog(t, s.Log("shards/1"), append(want, more...))
		})
	}
}

// TestDamageIsRefusedAtOpen: a damaged record in a segment that is not
// the last (one that was whole when the next began) is an error naming
// the file and offset, not a log quietly cut short.
func TestDamageIsRefusedAtOpen(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "raft-log")
	s, err := Open(Config{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Log("meta").StoreLogs(entries(1, 50, 1)); err != nil {
		t.Fatal(err)
	}
	p := lastSegment(t, dir)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A reopen begins a new segment: p is sealed now.
	s, err = Open(Config{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x40
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Config{Path: dir}); err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "offset") {
		t.Fatalf("a damaged sealed segment: %v", err)
	}
	// And a file that is not a segment of this format at all.
	if err := os.WriteFile(p, []byte("SQLite format 3\x00 and more bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Config{Path: dir}); err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("a foreign file: %v", err)
	}
}

// TestMiddleDeleteIsRefused: raft deletes a prefix or a suffix; a hole in
// the middle would break the one-run layout, so it is an error and
// nothing is deleted.
func TestMiddleDeleteIsRefused(t *testing.T) {
	t.Parallel()
	s := open(t)
	l := s.Log("shards/2")
	if err := l.StoreLogs(entries(1, 10, 1)); err != nil {
		t.Fatal(err)
	}
	if err := l.DeleteRange(4, 6); err == nil {
		t.Fatal("a hole was made")
	}
	checkLog(t, l, entries(1, 10, 1))
	if err := l.StoreLogs(entries(12, 12, 1)[:0]); err != nil {
		t.Fatal(err)
	}
	if err := l.StoreLogs([]*raft.Log{entries(12, 12, 1)[0], entries(14, 14, 1)[0]}); err == nil || errors.Is(err, ErrClosed) {
		t.Fatalf("entries that skip an index: %v", err)
	}
	checkLog(t, l, entries(1, 10, 1))
}

// TestLargeIdleEntriesAreCarried: an idle group whose live entries fill
// more than the copy budget (a few bulk batches, then nothing) is carried
// forward all the same, so the segments behind it go and their count stays
// bounded while a busy group appends and compacts.
func TestLargeIdleEntriesAreCarried(t *testing.T) {
	t.Parallel()
	s := openSmall(t)
	big := &raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte("b"), segSize/2+100)}
	if err := s.Log("meta").StoreLogs([]*raft.Log{big}); err != nil {
		t.Fatal(err)
	}
	busy := s.Log("shards/1")
	most := 0
	for i := uint64(1); i <= 2000; i++ {
		if err := busy.StoreLogs(entries(i, i, 1)); err != nil {
			t.Fatal(err)
		}
		if i > 4 {
			if err := busy.DeleteRange(i-4, i-4); err != nil {
				t.Fatal(err)
			}
		}
		n, _ := s.Segments()
		most = max(most, n)
	}
	if most > keepSegments+3 {
		t.Fatalf("%d segments at once: the idle group's large entry kept the ones after it", most)
	}
	checkLog(t, s.Log("meta"), []*raft.Log{big})
	checkLog(t, busy, entries(1997, 2000, 1))
	if c := s.carried.Load(); c == 0 || c > 40*uint64(len(big.Data)) {
		t.Fatalf("%d bytes copied forward: want the large entry copied, a bounded number of times", c)
	}
}

// TestOpenIgnoresWhatIsNotTheLog: a segment being begun when a crash came
// (under its temporary name, with a checkpoint older than the log) is
// removed at start, not read after the newer records; a segment missing
// between two others is an error naming it; a write of a group with no
// name is refused (its record could not be read back).
func TestOpenIgnoresWhatIsNotTheLog(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "raft-log")
	s, err := Open(Config{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	l := s.Log("meta")
	if err := l.StoreLogs(entries(1, 3, 1)); err != nil { // live entries: the first segment stays
		t.Fatal(err)
	}
	if err := l.SetUint64([]byte("CurrentTerm"), 5); err != nil {
		t.Fatal(err)
	}
	stale := s.checkpoint(nil, s.active().seq+1) // the checkpoint a rotation would begin with
	if err := l.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if err := s.Log("").StoreLogs(entries(1, 1, 1)); !errors.Is(err, errNoName) {
		t.Fatalf("a group with no name: %v", err)
	}
	next := filepath.Join(dir, segmentName(s.active().seq+1)+tmpSuffix)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(next, stale, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err = Open(Config{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.Log("meta").GetUint64([]byte("CurrentTerm")); err != nil || v != 7 {
		t.Fatalf("term %d, %v after a start beside a half-begun segment: want 7", v, err)
	}
	if _, err := os.Stat(next); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the half-begun segment is still there: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(Config{Path: dir}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Three segments now (one per start): the middle one goes.
	seqs, err := segmentFiles(dir)
	if err != nil || len(seqs) < 3 {
		t.Fatalf("segments %v, %v", seqs, err)
	}
	middle := filepath.Join(dir, segmentName(seqs[1]))
	if err := os.Remove(middle); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Config{Path: dir}); err == nil || !strings.Contains(err.Error(), segmentName(seqs[1])) {
		t.Fatalf("a log with a segment missing: %v", err)
	}
}

// TestALiveLogIsNotCopied: a log whose entries are all live (a bulk load
// its snapshots have not caught up with) grows by segments without copying
// any entry forward: copying a segment that is all live frees nothing.
func TestALiveLogIsNotCopied(t *testing.T) {
	t.Parallel()
	s := openSmall(t)
	var want []*raft.Log
	for i := uint64(1); i <= 200; i++ {
		e := &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte("x"), 1000)}
		if err := s.Log("shards/0").StoreLogs([]*raft.Log{e}); err != nil {
			t.Fatal(err)
		}
		want = append(want, e)
	}
	n, _ := s.Segments()
	if c := s.carried.Load(); c != 0 || n < 40 {
		t.Fatalf("%d bytes copied forward, %d segments, for a log all live", c, n)
	}
	checkLog(t, s.Log("shards/0"), want)
}

// TestNotMonotonic: the log does not tell raft it is a MonotonicLogStore,
// though a group's entries are one run (an append past a gap clears what
// is before it). raft clears a monotonic store's whole log when a follower
// installs a snapshot but keeps its last index where it was: a follower
// holding entries past the snapshot's index then applied entries it no
// longer had, and panicked ("log not found", a soak run's replaced node).
// Not monotonic, raft compacts up to the snapshot and keeps what follows.
func TestNotMonotonic(t *testing.T) {
	t.Parallel()
	var l raft.LogStore = open(t).Log("shards/1")
	if m, ok := l.(raft.MonotonicLogStore); ok && m.IsMonotonic() {
		t.Fatal("the log says it is monotonic")
	}
}

// FuzzOpenSegment: any bytes as a segment, the newest or an older one, open
// as a log or fail with an error: never a panic, never a log that then
// fails to read back what it says it holds.
// Its seeds run with the package's tests: go test -run '^$' -fuzz
// FuzzOpenSegment -fuzztime 100000x ./raftgroup/nodelog
func FuzzOpenSegment(f *testing.F) {
	dir := filepath.Join(f.TempDir(), "seed")
	s, err := Open(Config{Path: dir})
	if err != nil {
		f.Fatal(err)
	}
	l := s.Log("shards/1")
	for _, err := range []error{l.StoreLogs(entries(1, 5, 1)), l.SetUint64([]byte("CurrentTerm"), 3),
		l.DeleteRange(1, 2), l.StoreLogs(entries(5, 6, 2)), s.Log("meta").StoreLogs(entries(1, 1, 1)), s.Drop("meta")} {
		if err != nil {
			f.Fatal(err)
		}
	}
	p, size := lastSegment(f, dir), s.active().size
	if err := s.Close(); err != nil {
		f.Fatal(err)
	}
	seed, err := os.ReadFile(p)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed[:size], false)
	f.Add(seed[:size], true)
	f.Add(seed[:size-7], false)
	f.Add([]byte{}, true)
	f.Fuzz(func(t *testing.T, data []byte, older bool) {
		dir := filepath.Join(t.TempDir(), "raft-log")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, segmentName(1)), data, 0o600); err != nil {
			t.Fatal(err)
		}
		if older { // a newer segment after it: damage in it is no torn tail
			var hdr []byte
			hdr, _ = appendRecord(hdr, recSegment, func(b []byte) []byte {
				return binary.BigEndian.AppendUint64(append(b, segmentMagic...), 2)
			})
			if err := os.WriteFile(filepath.Join(dir, segmentName(2)), hdr, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		s, err := Open(Config{Path: dir})
		if err != nil {
			return
		}
		defer s.Close()
		names, err := s.Groups()
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			l := s.Log(name)
			first, _ := l.FirstIndex()
			last, _ := l.LastIndex()
			for i := first; i <= last && i > 0 && i-first < 1000; i++ {
				var e raft.Log
				if err := l.GetLog(i, &e); err != nil && !errors.Is(err, errCorrupt) {
					t.Fatalf("group %s holds %d to %d, but entry %d: %v", name, first, last, i, err)
				}
			}
		}
	})
}
