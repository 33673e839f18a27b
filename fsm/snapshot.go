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
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/internal/atomicfile"
	"github.com/linkraft/linkraft/internal/boltcheck"
	"github.com/linkraft/linkraft/internal/crashpoint"
)

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
	// A halted, stalled or released store is behind raft's applied index:
	// a marker now would claim entries the file does not hold.
	if s.dead.Load() || s.halt.Load() != nil || s.stall.Load() != nil {
		return nil, ErrNotApplying
	}
	// The marker says the file holds every applied entry, and raft
	// compacts its log behind it: what is pending is committed first.
	s.txMu.Lock()
	err := s.flushOnce()
	s.txMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotApplying, err)
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
	crashpoint.Hit(crashpoint.SnapshotPersist)
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
	if err := s.flushForRead(); err != nil {
		return nil, err
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
	if err := boltcheck.Check(tmpName); err != nil {
		return fmt.Errorf("restore: the received state: %w", err)
	}
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
	_ = atomicfile.SyncDir(filepath.Dir(s.path)) // best effort: the rename is done
	crashpoint.Hit(crashpoint.RestoreSwap)
	db, applied, err := s.openDB()
	if err != nil {
		return fmt.Errorf("restore: open restored file: %w", err)
	}
	s.mu.Lock()
	// What is pending was applied to the old file, and the restored state
	// is newer: it goes.
	s.txMu.Lock()
	if s.tx != nil {
		_ = s.tx.Rollback()
		s.tx = nil
	}
	clear(s.pending)
	s.pending, s.pendingN, s.pendingB, s.redo = s.pending[:0], 0, 0, false
	s.hasPending.Store(false)
	s.stall.Store(nil)
	if s.committed != nil {
		s.committed()
	}
	s.txMu.Unlock()
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
