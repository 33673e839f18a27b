// Package nodelog is a node's Raft log: one bbolt file that holds the log
// and stable store of every Raft group the node runs, a bucket per group,
// with one committer that gathers every group's pending appends, deletes
// and votes into one transaction. A node with N groups thus pays one commit
// (bbolt's two fdatasyncs) for all of them where one file per group paid N:
// the multi-Raft layout of TiKV's and CockroachDB's engines.
//
// Each group sees its bucket as a raft.LogStore and raft.StableStore (Log).
// A write returns once the transaction holding it is committed, so raft's
// durability contract holds unchanged. The committer does not wait for more
// writes: it commits what is queued as soon as the last commit is done, so a
// lone group pays no added latency, and under load the queue that builds
// during one commit is the next one's batch (group commit).
//
// Import and Export move one group's log between this file and a
// raft-boltdb file of its own (the layout before this package), for a data
// dir's upgrade and its rollback.
package nodelog

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/internal/boltcheck"
)

// ErrClosed is returned by every operation on a closed Store or Log.
var ErrClosed = errors.New("nodelog: closed")

// ErrKeyNotFound is returned by Get and GetUint64 for a key never set. Its
// text is what hashicorp/raft compares against ("not found").
var ErrKeyNotFound = errors.New("not found")

// Config configures a Store.
type Config struct {
	// Path is the file (created if missing).
	Path string
	// Timeout bounds the wait for the file's lock, held by another process
	// (a running node); 0 means 5 s. The error then wraps bolt.ErrTimeout.
	Timeout time.Duration
}

// maxBatch bounds the writes gathered into one transaction.
const maxBatch = 512

// Store is the node's log file and its committer.
type Store struct {
	db   *bolt.DB
	path string
	reqs chan *request
	quit chan struct{}
	done chan struct{}
	once sync.Once
	// commits counts the transactions committed, writes the writes they
	// held.
	commits, writes atomic.Uint64
}

// request is one write waiting for the next commit.
type request struct {
	fn  func(*bolt.Tx) error
	err chan error
}

// Open opens (or creates) the file at cfg.Path, after checking it for
// damage that bbolt would panic on (internal/boltcheck), and starts its
// committer.
func Open(cfg Config) (*Store, error) {
	if cfg.Path == "" {
		return nil, errors.New("nodelog: Config needs Path")
	}
	if err := boltcheck.Check(cfg.Path); err != nil {
		return nil, fmt.Errorf("raft log %s: %w", cfg.Path, err)
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	db, err := bolt.Open(cfg.Path, 0o600, &bolt.Options{
		Timeout: timeout,
		// The freelist is rebuilt at open instead of written by every
		// commit, and kept as a map: raft-boltdb's choice for Raft logs.
		NoFreelistSync: true,
		FreelistType:   bolt.FreelistMapType,
	})
	if err != nil {
		return nil, fmt.Errorf("raft log %s: %w", cfg.Path, err)
	}
	db.NoSync = faultNoSync()
	s := &Store{db: db, path: cfg.Path, reqs: make(chan *request, maxBatch), quit: make(chan struct{}), done: make(chan struct{})}
	go s.commit()
	return s, nil
}

// Path returns the file's path.
func (s *Store) Path() string { return s.path }

// FreeBytes returns the bytes of the file's free pages (space new writes
// reuse).
func (s *Store) FreeBytes() int64 { return int64(s.db.Stats().FreeAlloc) }

// Commits returns how many transactions the committer has committed (each
// a bbolt commit: two fdatasyncs) and how many writes (appends, deletes,
// votes of any group) they held: writes/commits is the group commit's
// batch.
func (s *Store) Commits() (commits, writes uint64) { return s.commits.Load(), s.writes.Load() }

// Close stops the committer (writes still queued fail with ErrClosed) and
// closes the file. Every group using it must be closed first.
func (s *Store) Close() error {
	var err error
	s.once.Do(func() {
		close(s.quit)
		<-s.done
		err = s.db.Close()
	})
	return err
}

// commit is the committer: it takes whatever writes are queued, runs them
// in one transaction, commits, and answers each, until Close.
func (s *Store) commit() {
	defer close(s.done)
	batch := make([]*request, 0, maxBatch)
	for {
		select {
		case <-s.quit:
			s.refuseQueued()
			return
		case r := <-s.reqs:
			batch = append(batch[:0], r)
		}
	gather:
		for len(batch) < maxBatch {
			select {
			case r := <-s.reqs:
				batch = append(batch, r)
			default:
				break gather
			}
		}
		var failed error
		err := s.db.Update(func(tx *bolt.Tx) error {
			for _, r := range batch {
				if failed = r.fn(tx); failed != nil {
					return failed
				}
			}
			return nil
		})
		if err == nil {
			s.commits.Add(1)
			s.writes.Add(uint64(len(batch)))
		}
		if failed != nil && len(batch) > 1 {
			// One write failed, and took the others' transaction with it:
			// each runs again alone, so it gets its own answer (bbolt's
			// Batch does the same). A failed commit (a full disk) is every
			// write's answer: alone, each would fail the same way.
			for _, r := range batch {
				err := s.db.Update(r.fn)
				if err == nil {
					s.commits.Add(1)
					s.writes.Add(1)
				}
				r.err <- err
			}
			continue
		}
		for _, r := range batch {
			r.err <- err
		}
	}
}

// refuseQueued answers the writes still queued at Close.
func (s *Store) refuseQueued() {
	for {
		select {
		case r := <-s.reqs:
			r.err <- ErrClosed
		default:
			return
		}
	}
}

// write runs fn in the next commit and returns once that commit is durable.
func (s *Store) write(fn func(*bolt.Tx) error) error {
	r := &request{fn: fn, err: make(chan error, 1)}
	select {
	case s.reqs <- r:
	case <-s.quit:
		return ErrClosed
	}
	select {
	case err := <-r.err:
		return err
	case <-s.done:
		// The committer answered everything it took before it stopped.
		select {
		case err := <-r.err:
			return err
		default:
			return ErrClosed
		}
	}
}

// Groups returns the names of the groups the file holds a log for.
func (s *Store) Groups() ([]string, error) {
	var names []string
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			names = append(names, string(name))
			return nil
		})
	})
	return names, err
}

// Has reports whether the file holds a log for group name.
func (s *Store) Has(name string) (bool, error) {
	var ok bool
	err := s.db.View(func(tx *bolt.Tx) error {
		ok = tx.Bucket([]byte(name)) != nil
		return nil
	})
	return ok, err
}

// Drop deletes group name's log and stable store (the group has left the
// node, and is closed). Dropping a group the file does not hold is not an
// error.
func (s *Store) Drop(name string) error {
	return s.write(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket([]byte(name)); err != nil && !errors.Is(err, bolt.ErrBucketNotFound) {
			return err
		}
		return nil
	})
}
