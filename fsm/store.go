package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/link"
)

var (
	bucketMeta = []byte("meta")
	keyApplied = []byte("applied")
)

// applyFunc applies one decoded-by-type command inside tx and returns the
// response handed to raft.ApplyFuture. It panics on an undecodable entry.
type applyFunc func(tx *bolt.Tx, typ CommandType, body []byte, index uint64) any

// store is the bbolt plumbing shared by the shard and meta FSMs: the file,
// the applied index, batching, snapshot and restore.
type store struct {
	path    string
	buckets [][]byte
	apply   applyFunc
	// afterCommit runs after each committed batch (cache hooks).
	afterCommit func()
	onRestore   func()

	// mu guards the db pointer against Restore's swap and Close. Readers
	// and ApplyBatch hold it shared (bbolt serialises its own writers);
	// Restore and Close hold it exclusively, and only for the swap.
	mu      sync.RWMutex
	db      *bolt.DB
	snaps   *sync.WaitGroup // open snapshot transactions on db
	applied atomic.Uint64   // written only from the FSM goroutine
	sending atomic.Int64    // state copies being sent (OpenState)
}

func boltOptions() *bolt.Options {
	return &bolt.Options{
		Timeout:         5 * time.Second,
		NoFreelistSync:  true,
		FreelistType:    bolt.FreelistMapType,
		InitialMmapSize: 64 << 20,
	}
}

func openStore(path string, buckets [][]byte, apply applyFunc) (*store, error) {
	s := &store{path: path, buckets: append([][]byte{bucketMeta}, buckets...), apply: apply}
	if err := s.open(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *store) open() error {
	db, applied, err := s.openDB()
	if err != nil {
		return err
	}
	s.db, s.snaps = db, new(sync.WaitGroup)
	s.applied.Store(applied)
	return nil
}

// openDB opens the file at s.path, creates the buckets, and reads the
// applied index.
func (s *store) openDB() (*bolt.DB, uint64, error) {
	if err := os.MkdirAll(filepath.Dir(s.path), 0o750); err != nil {
		return nil, 0, err
	}
	db, err := bolt.Open(s.path, 0o600, boltOptions())
	if err != nil {
		return nil, 0, fmt.Errorf("open %s: %w", s.path, err)
	}
	var applied uint64
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range s.buckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		if v := tx.Bucket(bucketMeta).Get(keyApplied); len(v) == 8 {
			applied = binary.BigEndian.Uint64(v)
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, 0, fmt.Errorf("init %s: %w", s.path, err)
	}
	return db, applied, nil
}

// AppliedIndex returns the last Raft index whose effects are on disk.
func (s *store) AppliedIndex() uint64 {
	return s.applied.Load()
}

// view runs fn in a read transaction of the current file.
func (s *store) view(fn func(tx *bolt.Tx) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.db == nil {
		return ErrClosed
	}
	return s.db.View(fn)
}

// ErrClosed is returned by reads after Close. It wraps link.ErrUnavailable:
// a request that races shutdown may be retried elsewhere.
var ErrClosed = fmt.Errorf("%w: fsm closed", link.ErrUnavailable)

// Close closes the bbolt file once open snapshots are released.
func (s *store) Close() error {
	s.mu.Lock()
	db, snaps := s.db, s.snaps
	s.db = nil
	s.mu.Unlock()
	if db == nil {
		return nil
	}
	snaps.Wait()
	return db.Close()
}

// Apply implements raft.FSM for a single entry.
func (s *store) Apply(l *raft.Log) any {
	return s.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch implements raft.BatchingFSM: every entry of the batch, and the
// new applied index, in one bbolt transaction. Entries at or below the stored
// applied index were applied before a restart and are skipped.
func (s *store) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.db == nil {
		panic("fsm: apply after close")
	}
	applied := s.applied.Load()
	last := applied
	err := s.db.Update(func(tx *bolt.Tx) error {
		for i, l := range logs {
			if l.Index <= applied {
				continue // replayed after restart: already in this file
			}
			if l.Type == raft.LogCommand {
				if len(l.Data) == 0 {
					panic(fmt.Sprintf("fsm %s: empty command at index %d", s.path, l.Index))
				}
				typ := CommandType(l.Data[0])
				out[i] = s.apply(tx, typ, l.Data[1:], l.Index)
			}
			last = l.Index
		}
		if last == applied {
			return nil
		}
		var buf [8]byte
		binary.BigEndian.PutUint64(buf[:], last)
		return tx.Bucket(bucketMeta).Put(keyApplied, buf[:])
	})
	if err != nil {
		// The log says this batch is committed; state that cannot record
		// it would silently diverge from the other replicas.
		panic(fmt.Sprintf("fsm %s: commit of batch ending at %d failed: %v", s.path, logs[len(logs)-1].Index, err))
	}
	s.applied.Store(last)
	if s.afterCommit != nil {
		s.afterCommit()
	}
	return out
}

// unknownType handles a command type this FSM does not know.
func unknownType(path string, typ CommandType, index uint64) any {
	if typ&IgnoreUnknownFlag != 0 {
		return nil
	}
	panic(fmt.Sprintf("fsm %s: unknown command type %d at index %d", path, typ, index))
}

// LiveStateMarker begins every snapshot that raft persists for this FSM.
// Such a snapshot holds no data: the FSM's state is its durable bbolt file,
// which already includes every entry up to the snapshot's index (and maybe
// more). Whoever opens the snapshot to send it (shard's snapshot store)
// streams the live file instead — etcd's and rqlite's way, so a snapshot
// costs neither a copy of the state on disk nor the I/O to write one.
const LiveStateMarker = "linkraft live-state snapshot v1\n"

// ErrLiveMarker is returned by Restore when handed a LiveStateMarker
// snapshot: it carries no state to restore from.
var ErrLiveMarker = errors.New("fsm: a live-state marker holds no state; open the snapshot through the snapshot store")

// Snapshot implements raft.FSM. It copies nothing: the snapshot it returns
// persists LiveStateMarker and the applied index (see LiveStateMarker).
// While a state copy is being sent it refuses, and raft tries again at its
// next snapshot check.
func (s *store) Snapshot() (raft.FSMSnapshot, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.db == nil {
		return nil, ErrClosed
	}
	if s.sending.Load() > 0 {
		return nil, ErrSendInProgress
	}
	return liveMarker(s.applied.Load()), nil
}

// liveMarker is the FSMSnapshot raft persists: the marker and the index.
type liveMarker uint64

// Persist writes the marker.
func (m liveMarker) Persist(sink raft.SnapshotSink) error {
	b := binary.BigEndian.AppendUint64([]byte(LiveStateMarker), uint64(m))
	if _, err := sink.Write(b); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

// Release implements raft.FSMSnapshot.
func (liveMarker) Release() {}

// StateSnapshot opens a point-in-time view of the state file (a read
// transaction); Persist streams it as a whole bbolt file, the form Restore
// takes. The file it was taken from stays open until Release, even if
// Restore replaces it.
func (s *store) StateSnapshot() (raft.FSMSnapshot, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.db == nil {
		return nil, ErrClosed
	}
	tx, err := s.db.Begin(false)
	if err != nil {
		return nil, err
	}
	s.snaps.Add(1)
	return &snapshot{tx: tx, done: s.snaps.Done}, nil
}

// OpenState returns the current state file as StateSnapshot would persist
// it, with its exact size in bytes: what a follower that needs a snapshot
// is sent. The state is first copied to an unlinked temporary file beside
// the state file, so the read transaction lasts a local copy, not a network
// transfer: a read transaction held open blocks bbolt from growing its
// mapping, which would stall every write to the shard until a slow follower
// had its copy. Until the returned reader is closed, Snapshot refuses
// (ErrSendInProgress), so that raft cannot compact away the log entries the
// follower will need after the state it is being sent.
func (s *store) OpenState() (int64, io.ReadCloser, error) {
	snap, err := s.StateSnapshot()
	if err != nil {
		return 0, nil, err
	}
	sn := snap.(*snapshot)
	defer sn.Release()
	f, err := os.CreateTemp(filepath.Dir(s.path), filepath.Base(s.path)+".send-*")
	if err != nil {
		return 0, nil, err
	}
	// Unlinked at once: the open file is all that holds the copy, so
	// nothing is left behind by a crash.
	_ = os.Remove(f.Name())
	n, err := sn.tx.WriteTo(f)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return 0, nil, fmt.Errorf("copy state to send: %w", err)
	}
	s.sending.Add(1)
	return n, &sendFile{File: f, done: func() { s.sending.Add(-1) }}, nil
}

// ErrSendInProgress is returned by Snapshot while a state copy is being
// sent to a follower (see OpenState).
var ErrSendInProgress = errors.New("fsm: a state copy is being sent; snapshot later")

// sendFile is the copy OpenState returns; Close releases it once.
type sendFile struct {
	*os.File
	done func()
	once sync.Once
}

// Close closes the copy and lets snapshots go on.
func (f *sendFile) Close() error {
	err := f.File.Close()
	f.once.Do(f.done)
	return err
}

// snapshot holds a read transaction of the file that was current when it was
// taken; that file stays open until Release, even if Restore replaced it.
type snapshot struct {
	tx   *bolt.Tx
	done func()
	once sync.Once
}

// Persist streams the bbolt file as of the snapshot.
func (sn *snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sn.tx.WriteTo(sink); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

// Release ends the read transaction.
func (sn *snapshot) Release() {
	sn.once.Do(func() {
		_ = sn.tx.Rollback()
		sn.done()
	})
}

// Restore implements raft.FSM: the stream becomes a temp file, is fsynced,
// checked, and replaces the current file.
func (s *store) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	tmp, err := os.CreateTemp(filepath.Dir(s.path), filepath.Base(s.path)+".restore-*")
	if err != nil {
		return err
	}
	tmpName := tmp.Name()
	defer os.Remove(tmpName) // no-op after the rename
	head := make([]byte, len(LiveStateMarker))
	n, _ := io.ReadFull(rc, head)
	if string(head[:n]) == LiveStateMarker {
		tmp.Close()
		return ErrLiveMarker
	}
	if _, err := io.Copy(tmp, io.MultiReader(bytes.NewReader(head[:n]), rc)); err != nil {
		tmp.Close()
		return fmt.Errorf("restore: copy: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	// Check that the stream is a bbolt file before discarding ours.
	check, err := bolt.Open(tmpName, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		return fmt.Errorf("restore: snapshot is not a bbolt file: %w", err)
	}
	_ = check.Close()

	// Rename the new file over the path and open it. The old file stays
	// open (its inode lives on) until every snapshot taken from it is
	// released: closing it now would wait for a snapshot that raft's
	// snapshot goroutine may be streaming, and raft waits for Restore.
	if err := os.Rename(tmpName, s.path); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(s.path)); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	db, applied, err := s.openDB()
	if err != nil {
		return fmt.Errorf("restore: open restored file: %w", err)
	}
	s.mu.Lock()
	oldDB, oldSnaps := s.db, s.snaps
	s.db, s.snaps = db, new(sync.WaitGroup)
	s.applied.Store(applied)
	s.mu.Unlock()
	if oldDB != nil {
		go func() {
			oldSnaps.Wait()
			_ = oldDB.Close()
		}()
	}
	if s.onRestore != nil {
		s.onRestore()
	}
	return nil
}
