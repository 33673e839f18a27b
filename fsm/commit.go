package fsm

import (
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/internal/crashpoint"
	"github.com/linkraft/linkraft/link"
)

// pendingBatch is a batch applied to the open transaction and not yet
// committed, kept so that a failed commit can apply it again.
type pendingBatch struct {
	logs []*raft.Log
	vals []any
	// out receives the batch's answers when it is applied again before raft
	// has them (its first apply failed); nil once they were handed back.
	out []any
}

// DefaultCommitInterval is how long applied entries may wait in the open
// transaction of a link shard's state file before it is committed. At a
// second a shard's file fsyncs about once a second under load rather than
// twenty times; a crash costs the restart no more than re-applying that
// second from the log (BENCHMARKS.md, issue 28 session 8). maxPending and
// maxPendingBytes bound it sooner under a burst.
const DefaultCommitInterval = time.Second

// ErrStalled is returned by reads that need the pending state committed
// while commits of the state file are failing (a full disk).
var ErrStalled = fmt.Errorf("%w: the state file cannot commit (a full disk?)", link.ErrUnavailable)

// Stall is a commit that keeps failing (ENOSPC, EIO) and is being retried.
type Stall struct {
	// Index is the last index of the batch.
	Index    uint64
	Err      string
	Since    time.Time
	Attempts int
}

// flushForRead commits the open transaction, if any, for a reader (s.mu
// held shared). While commits fail it does not try: the apply loop and the
// timer retry, and the reader gets ErrStalled.
func (s *store) flushForRead() error {
	if !s.hasPending.Load() {
		return nil
	}
	s.txMu.Lock()
	defer s.txMu.Unlock()
	if s.redo || s.stall.Load() != nil {
		return ErrStalled
	}
	if err := s.flushOnce(); err != nil {
		return fmt.Errorf("%w: %w", ErrStalled, err)
	}
	return nil
}

// flushOnce commits the open transaction (txMu held). A failure is
// recorded as a stall and tried again by the timer (and by the next batch).
func (s *store) flushOnce() error {
	err := s.flushLocked()
	if err != nil {
		s.noteStall(err, 1)
		s.timerSet = false
		if s.timer != nil {
			s.timer.Stop()
		}
		s.armLocked(min(time.Duration(s.stall.Load().Attempts)*100*time.Millisecond, 2*time.Second))
	}
	return err
}

// addPending records b as applied to the open transaction.
func (s *store) addPending(b pendingBatch) {
	s.pending = append(s.pending, b)
	s.pendingN += len(b.logs)
	for _, l := range b.logs {
		s.pendingB += len(l.Data)
	}
	s.hasPending.Store(true)
}

// flushLocked commits the open transaction (txMu held), first applying
// the pending batches again if a failed commit rolled them back.
func (s *store) flushLocked() error {
	if s.redo {
		if err := s.reapplyLocked(); err != nil {
			return err
		}
	}
	if s.tx == nil {
		return nil
	}
	err := s.tx.Commit() // a failed commit rolls back
	s.tx = nil
	if err != nil {
		s.redo = len(s.pending) > 0
		return err
	}
	crashpoint.Hit(crashpoint.StateCommitted)
	if s.stall.Load() != nil {
		s.log.Info("commit succeeded after retries; apply resumed", "index", s.lastPending(), "attempts", s.stall.Load().Attempts)
		s.stall.Store(nil)
	}
	clear(s.pending)
	s.pending, s.pendingN, s.pendingB = s.pending[:0], 0, 0
	s.hasPending.Store(false)
	if s.committed != nil {
		s.committed()
	}
	return nil
}

// reapplyLocked applies the pending batches to a new transaction after a
// failed commit rolled them back. Their answers were handed back already
// (but for a batch whose first apply failed) and their changes delivered:
// only the last batch's changes are kept, and only if it is such a batch.
func (s *store) reapplyLocked() error {
	tx, err := s.beginWrite()
	if err != nil {
		return err
	}
	keep := false
	for _, b := range s.pending {
		if s.beforeBatch != nil {
			s.beforeBatch()
		}
		out := b.out
		if out == nil {
			out = make([]any, len(b.logs))
		}
		if _, err := s.applyTo(tx, b.logs, b.vals, out, 0); err != nil {
			_ = tx.Rollback()
			return err
		}
		keep = b.out != nil
	}
	if !keep && s.beforeBatch != nil {
		s.beforeBatch()
	}
	for i := range s.pending {
		s.pending[i].out = nil
	}
	s.tx, s.redo = tx, false
	return nil
}

// lastPending is the last index in the open transaction (0 for none).
func (s *store) lastPending() uint64 {
	if len(s.pending) == 0 {
		return 0
	}
	b := s.pending[len(s.pending)-1]
	return b.logs[len(b.logs)-1].Index
}

// flushBlocking commits the open transaction, retrying with backoff until
// it succeeds (true) or Release (false: the store is dead). txMu is held,
// and let go while it waits, so that readers are answered meanwhile.
func (s *store) flushBlocking() bool {
	delay := 10 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := s.flushLocked()
		if err == nil {
			return true
		}
		s.noteStall(err, attempt)
		s.txMu.Unlock()
		select {
		case <-s.released:
			s.dead.Store(true)
			s.txMu.Lock()
			return false
		case <-time.After(delay):
		}
		s.txMu.Lock()
		delay = min(2*delay, 2*time.Second)
	}
}

// noteStall records a failed commit (or apply) of the pending entries.
func (s *store) noteStall(err error, attempt int) {
	st := &Stall{Index: s.lastPending(), Err: err.Error(), Attempts: attempt, Since: time.Now()}
	if prev := s.stall.Load(); prev != nil {
		st.Since = prev.Since
		st.Attempts = max(attempt, prev.Attempts+1)
	}
	s.stall.Store(st)
	if st.Attempts == 1 || st.Attempts%50 == 0 {
		s.log.Error("commit failed; retrying (a full disk?)", "index", st.Index, "attempt", st.Attempts, "err", err)
	}
}

// armLocked makes sure the open transaction is committed within d (txMu
// held).
func (s *store) armLocked(d time.Duration) {
	if s.timerSet || s.dead.Load() {
		return
	}
	s.timerSet = true
	if s.timer == nil {
		s.timer = time.AfterFunc(d, s.onTimer)
		return
	}
	s.timer.Reset(d)
}

// onTimer commits the open transaction; a failure is tried again later.
func (s *store) onTimer() {
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.txMu.Lock()
	defer s.txMu.Unlock()
	s.timerSet = false
	if s.db == nil || s.dead.Load() || (s.tx == nil && !s.redo) {
		return
	}
	_ = s.flushOnce()
}

// waitRelease blocks until Release, then marks the store dead.
func (s *store) waitRelease() {
	<-s.released
	s.dead.Store(true)
}

// Bounds of what the open transaction holds before it is committed.
const (
	maxPending      = 8192
	maxPendingBytes = 16 << 20
)
