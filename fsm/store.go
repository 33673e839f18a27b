package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/boltcheck"
	"github.com/linkraft/linkraft/internal/crashpoint"
	"github.com/linkraft/linkraft/internal/status"
	"github.com/linkraft/linkraft/internal/wire"
	"github.com/linkraft/linkraft/link"
)

var (
	bucketMeta = []byte("meta")
	keyApplied = []byte("applied")
)

// applyFunc applies one command, decoded and validated by the registry
// (registry.go) into v, inside tx, and returns the response handed to
// raft.ApplyFuture. An error is a failure of the state file, not of the
// command (a business failure is a value in the response): the batch's
// transaction is rolled back, and the store retries it or, for state it
// cannot read (ErrCorrupt), halts the group at the entry.
type applyFunc func(tx *bolt.Tx, typ command.Type, v any, index uint64) (any, error)

// store is the bbolt plumbing shared by the shard and meta FSMs: the file,
// the applied index, batching, snapshot and restore, and what happens to an
// entry that cannot be applied (rejected, halted on, or retried).
type store struct {
	path    string
	kind    command.GroupKind
	buckets [][]byte
	apply   applyFunc
	log     *slog.Logger
	// beforeBatch runs before each attempt at a batch (a retried commit
	// starts over).
	beforeBatch func()
	// begin runs on each write transaction the store begins for applies
	// (bucket settings that bbolt does not keep in the file).
	begin func(*bolt.Tx)
	// afterApply runs once a batch's effects are visible to reads (cache
	// hooks): at once when the file commits on an interval, after the
	// commit when it commits every batch. A batch applied again after a
	// failed commit does not run it again.
	afterApply func()
	// committed runs after each commit of the file, when nothing applied
	// is pending any more (and after a restore discarded what was): the
	// shard drops its overlay of pending links.
	committed func()
	onRestore func()
	// prepare, if set, runs on every file opened (at start and after a
	// restore) before it is used: derived state an older version did not
	// keep is built here.
	prepare func(db *bolt.DB, log *slog.Logger) error

	// mu guards the db pointer against Restore's swap and Close. Readers
	// and ApplyBatch hold it shared (bbolt serialises its own writers);
	// Restore and Close hold it exclusively, and only for the swap.
	mu      sync.RWMutex
	db      *bolt.DB
	snaps   *sync.WaitGroup // open snapshot transactions on db
	applied atomic.Uint64   // written only from the FSM goroutine
	sending atomic.Int64    // state copies being sent (OpenState)

	rejected atomic.Uint64 // entries rejected since open
	// halt is set when apply met a command type this version does not
	// know; stall while a commit fails (a full disk) and apply retries.
	halt  atomic.Pointer[Halt]
	stall atomic.Pointer[Stall]
	// released ends a halt or a stall's retries: the node is closing.
	// Once released, apply applies nothing more (dead), so that nothing
	// after the entry it stopped at is applied before it.
	released    chan struct{}
	releaseOnce sync.Once
	dead        atomic.Bool

	// The open write transaction, when the file commits on an interval
	// (etcd's backend): batches are applied to tx as raft hands them over
	// and are answered at once; tx is committed (one fsync for all of
	// them) when interval has passed since the first, when maxPending
	// entries or maxPendingBytes of commands are in it, before a snapshot,
	// before any read that the pending overlay cannot answer, and at
	// Close. What a crash loses of it, raft applies again from its log:
	// the log is compacted only up to a snapshot, and a snapshot commits
	// first. interval 0 commits every batch before answering it.
	interval time.Duration
	txMu     sync.Mutex // guards tx, pending, redo, timerSet
	tx       *bolt.Tx
	pending  []pendingBatch // applied to tx (or to be applied again), oldest first
	pendingN int            // entries in pending
	pendingB int            // command bytes in pending
	// redo is set when a failed commit rolled tx back: pending must be
	// applied again to a new transaction before anything else.
	redo       bool
	hasPending atomic.Bool
	timer      *time.Timer
	timerSet   bool
}

// Halt says where and why a group stopped applying on this node: an entry
// of a command type this version does not know (a newer version wrote it),
// or one that met state this replica cannot read (a damaged file).
type Halt struct {
	Index  uint64
	Type   command.Type
	Reason string
}

func boltOptions() *bolt.Options {
	return &bolt.Options{
		Timeout:         5 * time.Second,
		NoFreelistSync:  true,
		FreelistType:    bolt.FreelistMapType,
		InitialMmapSize: 64 << 20,
	}
}

func openStore(path string, kind command.GroupKind, buckets [][]byte, apply applyFunc, prepare func(*bolt.DB, *slog.Logger) error, log *slog.Logger, interval time.Duration) (*store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &store{path: path, kind: kind, buckets: append([][]byte{bucketMeta}, buckets...), apply: apply, prepare: prepare,
		log: log.With("file", path), released: make(chan struct{}), interval: max(interval, 0)}
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
	db, err := openBolt(s.path)
	if err != nil {
		return nil, 0, err
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
	if err == nil && s.prepare != nil {
		err = s.prepare(db, s.log)
	}
	if err != nil {
		_ = db.Close()
		return nil, 0, fmt.Errorf("init %s: %w", s.path, err)
	}
	return db, applied, nil
}

// AppliedIndex returns the last Raft index whose effects reads see. With
// a commit interval they may not be in the file yet: a crash loses them
// from the file and raft applies them again from its log.
func (s *store) AppliedIndex() uint64 {
	return s.applied.Load()
}

// view runs fn in a read transaction of the current file, after
// committing what is pending so that the read sees every applied entry.
func (s *store) view(fn func(tx *bolt.Tx) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.db == nil || s.dead.Load() {
		return ErrClosed
	}
	if err := s.flushForRead(); err != nil {
		return err
	}
	return s.db.View(fn)
}

// viewCommitted runs fn in a read transaction of the file as committed:
// for reads that consult the pending overlay first.
func (s *store) viewCommitted(fn func(tx *bolt.Tx) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.db == nil || s.dead.Load() {
		return ErrClosed
	}
	return s.db.View(fn)
}

// Size returns the bytes of the state file in use as last committed (its
// pages up to the high-water mark), without committing what is pending.
func (s *store) Size() int64 {
	var n int64
	_ = s.viewCommitted(func(tx *bolt.Tx) error {
		n = tx.Size()
		return nil
	})
	return n
}

// FreeBytes adds the bytes of the state file's free pages to into, under
// the file's path (the storage alarm does not count them).
func (s *store) FreeBytes(into map[string]int64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.db != nil {
		into[s.path] += int64(s.db.Stats().FreeAlloc)
	}
}

// Rejected returns how many committed entries this replica rejected since
// it opened.
func (s *store) Rejected() uint64 { return s.rejected.Load() }

// Halted returns where apply stopped at an unknown command type, or nil.
func (s *store) Halted() *Halt { return s.halt.Load() }

// Stalled returns the commit being retried, or nil.
func (s *store) Stalled() *Stall { return s.stall.Load() }

// Health is what Halted, Stalled and Rejected say, as a node reports it.
func (s *store) Health() status.Health {
	h := status.Health{Rejected: s.Rejected()}
	if x := s.Halted(); x != nil {
		h.Halted = &status.Halt{Index: x.Index, Type: uint8(x.Type), Reason: x.Reason}
	}
	if x := s.Stalled(); x != nil {
		h.Stalled = &status.Stall{Index: x.Index, Err: x.Err, Since: x.Since, Attempts: x.Attempts}
	}
	return h
}

// Release ends a halt or a stalled commit's retries so that raft can shut
// down; after it the store applies nothing more. The group calls it before
// raft.Shutdown.
func (s *store) Release() {
	s.releaseOnce.Do(func() { close(s.released) })
}

// ErrNotApplying is returned by Snapshot while apply is halted or stalled.
var ErrNotApplying = errors.New("fsm: apply is halted or stalled; no snapshot")

// ErrClosed is returned by reads after Close. It wraps link.ErrUnavailable:
// a request that races shutdown may be retried elsewhere.
var ErrClosed = fmt.Errorf("%w: fsm closed", link.ErrUnavailable)

// Close commits what is pending (raft applies it again from its log if
// that fails) and closes the bbolt file once open snapshots are released.
func (s *store) Close() error {
	s.Release()
	s.mu.Lock()
	s.txMu.Lock()
	if s.timer != nil {
		s.timer.Stop()
	}
	if s.tx != nil && !s.redo {
		if err := s.flushLocked(); err != nil {
			s.log.Warn("commit at close failed; the log holds the entries", "err", err)
		}
	}
	if s.tx != nil {
		_ = s.tx.Rollback()
		s.tx = nil
	}
	s.txMu.Unlock()
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
//
// Nothing an entry holds, and no failure of the file, makes it panic. An
// entry that fails to decode or validate is answered with a
// *command.Rejection and changes nothing, on every replica alike. An entry
// of a type this version does not know, or one whose apply meets state the
// file cannot give back (ErrCorrupt), stops the group here: the entries
// before it are applied, and the call waits (the group applies nothing more
// on this node) until Release; a restart on a version that knows the type,
// or on a repaired replica, carries on. A commit that fails (a full disk) is
// retried with backoff until it succeeds or Release: never skipped.
func (s *store) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	if s.dead.Load() || s.halt.Load() != nil {
		s.waitRelease()
		return out
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.db == nil {
		// raftgroup closes raft before the FSM, and raft applies nothing
		// after its Shutdown returns.
		panic("fsm: apply after close: raft applied past its shutdown")
	}
	applied := s.applied.Load()
	// Decode and validate first; cut the batch at an unknown type.
	vals := make([]any, len(logs))
	cut := len(logs)
	for i, l := range logs {
		if l.Index <= applied || l.Type != raft.LogCommand {
			continue
		}
		if len(l.Data) == 0 {
			out[i] = s.reject(l.Index, 0, fmt.Errorf("%w: empty command", wire.ErrDecode))
			continue
		}
		typ := command.Type(l.Data[0])
		spec, ok := command.Lookup(typ)
		if !ok || spec.Group != s.kind {
			if typ&command.IgnoreUnknownFlag != 0 {
				continue // optional state a newer version added: skipped
			}
			if ok { // a known type of the other group kind
				out[i] = s.reject(l.Index, typ, fmt.Errorf("%w: a %s command in a %v group", wire.ErrDecode, spec.Name, s.kind))
				continue
			}
			cut = i
			break
		}
		v, err := spec.Parse(l.Data[1:])
		if err != nil {
			out[i] = s.reject(l.Index, typ, err)
			continue
		}
		vals[i] = v
	}
	halted := false
	if cut > 0 {
		halted = s.applyBatch(logs[:cut], vals[:cut], out[:cut], applied)
	}
	if !halted && cut < len(logs) {
		s.haltAt(logs[cut], "command type "+strconv.Itoa(int(logs[cut].Data[0]))+" is unknown to this version; upgrade linknode")
		halted = true
	}
	if halted {
		s.waitRelease()
	}
	return out
}

// haltAt stops apply at entry l, for reason.
func (s *store) haltAt(l *raft.Log, reason string) {
	h := &Halt{Index: l.Index, Reason: reason}
	if len(l.Data) > 0 {
		h.Type = command.Type(l.Data[0])
	}
	s.halt.Store(h)
	s.log.Error("apply halted on this node", "index", h.Index, "type", h.Type, "reason", reason)
}

// applyBatch applies logs (their decoded vals) and the new applied index to
// the open transaction, and commits it when that is due (every batch
// without an interval). A failed commit is retried, with every pending
// batch applied again, until it succeeds or Release: never skipped. An
// entry whose apply meets state the file cannot give back (ErrCorrupt)
// cannot succeed on a retry: what is pending and the entries before it are
// committed, and the group halts at it (applyBatch reports true).
func (s *store) applyBatch(logs []*raft.Log, vals, out []any, applied uint64) (halted bool) {
	s.txMu.Lock()
	defer s.txMu.Unlock()
	if crashpoint.Built && s.tx != nil && len(s.pending) > 0 {
		// Earlier batches are applied and answered, not committed.
		crashpoint.Hit(crashpoint.StatePending)
	}
	last := logs[len(logs)-1].Index
	if s.redo && !s.flushBlocking() {
		return false
	}
	failed, err := -1, error(nil)
	if s.tx == nil {
		s.tx, err = s.beginWrite()
	}
	if err == nil {
		if s.beforeBatch != nil {
			s.beforeBatch()
		}
		failed, err = s.applyTo(s.tx, logs, vals, out, applied)
	}
	if err != nil {
		// The transaction holds part of this batch: it goes, and what was
		// pending in it is applied again.
		if s.tx != nil {
			_ = s.tx.Rollback()
			s.tx = nil
		}
		if failed >= 0 && errors.Is(err, ErrCorrupt) {
			clear(out)
			if failed > 0 {
				s.addPending(pendingBatch{logs: logs[:failed], vals: vals[:failed], out: out[:failed]})
			}
			s.redo = len(s.pending) > 0
			if !s.flushBlocking() {
				return true
			}
			if failed > 0 {
				if done := logs[failed-1].Index; done > applied {
					s.applied.Store(done)
				}
				if s.afterApply != nil {
					s.afterApply()
				}
			}
			s.stall.Store(nil)
			s.haltAt(logs[failed], err.Error()+"; if the group's other replicas are healthy, repair this one (linknode repair-shard)")
			return true
		}
		s.addPending(pendingBatch{logs: logs, vals: vals, out: out})
		s.redo = true
		s.noteStall(err, 1)
		if !s.flushBlocking() {
			return false
		}
		// flushBlocking applied this batch last, keeping its changes.
	} else {
		b := pendingBatch{logs: logs, vals: vals}
		due := s.interval == 0 || s.pendingN+len(logs) >= maxPending || s.pendingB >= maxPendingBytes
		if due {
			// Committed before it is answered or delivered: a commit that
			// fails and applies it again keeps its answers and changes.
			b.out = out
		}
		s.addPending(b)
		if due && !s.flushBlocking() {
			return false
		}
	}
	if last > applied {
		s.applied.Store(last)
	}
	if s.afterApply != nil {
		s.afterApply()
	}
	if s.tx != nil {
		s.armLocked(s.interval)
	}
	return false
}

// applyTo applies logs and the new applied index in tx. It returns the
// position of the entry whose apply failed, or -1.
func (s *store) applyTo(tx *bolt.Tx, logs []*raft.Log, vals, out []any, applied uint64) (int, error) {
	for i, l := range logs {
		if vals[i] == nil {
			continue
		}
		res, err := s.apply(tx, command.Type(l.Data[0]), vals[i], l.Index)
		if err != nil {
			return i, fmt.Errorf("entry %d: %w", l.Index, err)
		}
		out[i] = res
	}
	last := logs[len(logs)-1].Index
	if last <= applied {
		return -1, nil
	}
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], last)
	return -1, tx.Bucket(bucketMeta).Put(keyApplied, buf[:])
}

// beginWrite begins a write transaction for applies, with the settings
// of s.begin.
func (s *store) beginWrite() (*bolt.Tx, error) {
	tx, err := s.db.Begin(true)
	if err == nil && s.begin != nil {
		s.begin(tx)
	}
	return tx, err
}

// reject answers an entry that failed to decode or validate.
func (s *store) reject(index uint64, typ command.Type, err error) any {
	s.rejected.Add(1)
	s.log.Error("rejected a committed command", "index", index, "type", typ, "command", command.Name(typ), "err", err)
	return &command.Rejection{Index: index, Type: typ, Err: err}
}

// openBolt opens a state file, turning a panic of bbolt on a corrupt file
// into an error that names the file.
func openBolt(path string) (db *bolt.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %s: bbolt: %v", ErrCorrupt, path, r)
		}
	}()
	// bbolt rebuilds the freelist of a file without one on a goroutine
	// of its own, which panics past any recover on a damaged page: the
	// pages are checked first.
	if err := boltcheck.Check(path); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, path, err)
	}
	db, err = bolt.Open(path, 0o600, boltOptions())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return db, nil
}

// ErrCorrupt is wrapped by the error of a state file that cannot be opened
// because it is damaged.
var ErrCorrupt = errors.New("fsm: state file corrupt")
