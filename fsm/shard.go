package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/wire"
	"github.com/linkraft/linkraft/link"
)

var (
	bucketLinks       = []byte("links")
	bucketVisitNonces = []byte("visit-nonces") // code 0x00 nonce(8) of granted visits
)

// ShardConfig configures a ShardFSM.
type ShardConfig struct {
	// Path of the bbolt file; created if missing.
	Path string
	// OnChange, if set, is called after each applied batch with every link
	// the batch changed (tombstones included), in apply order, once reads
	// see them (with a commit interval, before the file commits them). The
	// shard uses it to update its cache. It runs on the FSM goroutine (or
	// on a goroutine applying pending batches again): keep it short.
	OnChange func(l *link.Link)
	// CommitInterval is how long applied entries may wait in the state
	// file's open transaction before a commit (DefaultCommitInterval is
	// what a node uses); 0 commits every batch before answering it.
	CommitInterval time.Duration
	// OnRestore, if set, is called after a snapshot replaced the state.
	OnRestore func()
	// Logger receives rejected entries and apply stalls (may be nil).
	Logger *slog.Logger
}

// ShardFSM is the state machine of one shard: code → link, in bbolt.
type ShardFSM struct {
	*store
	onChange func(*link.Link)
	changed  []*link.Link // filled during a batch, drained once applied
	// pending holds the links changed by applied entries that the file
	// has not committed yet, by code: Get answers from it first, so a
	// point read needs no commit.
	pendingMu sync.RWMutex
	pending   map[string]*link.Link
}

// NewShardFSM opens (or creates) the shard's bbolt file.
func NewShardFSM(cfg ShardConfig) (*ShardFSM, error) {
	f := &ShardFSM{onChange: cfg.OnChange}
	s, err := openStore(cfg.Path, command.GroupShard,
		[][]byte{bucketLinks, bucketVisitNonces, bucketClicks, bucketClickHours, bucketClickSeq, bucketByOwner, bucketByCreated, bucketByTag, bucketByClicks, bucketByClicksAll,
			bucketTagCounts, bucketTagCountsAll, bucketClaims, bucketClaimExpiry},
		f.applyCommand, buildIndexes, cfg.Logger, cfg.CommitInterval)
	if err != nil {
		return nil, err
	}
	s.afterApply = f.flushChanges
	s.begin = fillIndexes
	s.beforeBatch = func() { // a retried commit starts its changes over
		clear(f.changed)
		f.changed = f.changed[:0]
	}
	if s.interval > 0 {
		f.pending = map[string]*link.Link{}
		s.committed = func() {
			f.pendingMu.Lock()
			clear(f.pending)
			f.pendingMu.Unlock()
		}
	}
	s.onRestore = cfg.OnRestore
	f.store = s
	return f, nil
}

func (f *ShardFSM) flushChanges() {
	if f.pending != nil && len(f.changed) > 0 {
		f.pendingMu.Lock()
		for _, l := range f.changed {
			f.pending[l.Code] = l
		}
		f.pendingMu.Unlock()
	}
	if f.onChange != nil {
		for _, l := range f.changed {
			f.onChange(l)
		}
	}
	clear(f.changed)
	f.changed = f.changed[:0]
}

// applyCommand applies a command the registry decoded and validated.
func (f *ShardFSM) applyCommand(tx *bolt.Tx, typ command.Type, v any, index uint64) (any, error) {
	switch c := v.(type) {
	case *command.CreateIfAbsent:
		return f.applyCreate(tx, c, index)
	case *command.Update:
		return f.applyUpdate(tx, c, index)
	case *command.Delete:
		return f.applyDelete(tx, c, index)
	case *command.ConsumeVisit:
		return f.applyConsumeVisit(tx, c, index)
	case command.ClickBatchBody:
		return f.applyClickBatch(tx, c)
	case *command.CreateBatch:
		return f.applyCreateBatch(tx, c, index)
	case *command.ClaimKey:
		return f.applyClaim(tx, c)
	case *command.RestoreLinks:
		return f.applyRestore(tx, c, index)
	}
	return f.reject(index, typ, fmt.Errorf("%w: no shard apply for %T", wire.ErrDecode, v)), nil
}

// live is nil for a live link, link.ErrNotFound for none and
// link.ErrDeleted for a tombstone.
func live(l *link.Link) error {
	switch {
	case l == nil:
		return link.ErrNotFound
	case l.Deleted:
		return link.ErrDeleted
	}
	return nil
}

// getLink returns the stored link of code, or nil; a record that does not
// decode is ErrCorrupt.
func getLink(tx *bolt.Tx, code string) (*link.Link, error) {
	v := tx.Bucket(bucketLinks).Get([]byte(code))
	if v == nil {
		return nil, nil
	}
	l, err := command.DecodeRecord([]byte(code), v)
	if err != nil {
		return nil, corrupt("stored link %q: %w", code, err)
	}
	return l, nil
}

// corrupt is an ErrCorrupt error: what the file holds cannot be read.
func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// putLink stores l, whose stored form before is old (nil for none: the
// callers have read it already), and its index entries.
func (f *ShardFSM) putLink(tx *bolt.Tx, old, l *link.Link) error {
	if err := faultBeforePut(tx, l.Code); err != nil {
		return err
	}
	if err := tx.Bucket(bucketLinks).Put([]byte(l.Code), command.EncodeRecord(l)); err != nil {
		return fmt.Errorf("put %q: %w", l.Code, err)
	}
	if err := index(tx, old, l); err != nil {
		return fmt.Errorf("index %q: %w", l.Code, err)
	}
	f.changed = append(f.changed, l.Clone())
	return nil
}

// linkResult stores l (see putLink) and answers it.
func (f *ShardFSM) linkResult(tx *bolt.Tx, old, l *link.Link) (any, error) {
	if err := f.putLink(tx, old, l); err != nil {
		return nil, err
	}
	return &command.LinkResult{Link: l}, nil
}

func (f *ShardFSM) applyCreate(tx *bolt.Tx, c *command.CreateIfAbsent, index uint64) (any, error) {
	old, err := getLink(tx, c.Code)
	if err != nil {
		return nil, err
	}
	if old != nil {
		if c.Nonce != 0 && old.Nonce == c.Nonce {
			// The same create, retried after an unknown outcome: it took
			// effect, so it succeeds — even if the link was deleted since
			// (then the tombstone is returned). Answering "taken" would
			// tell the creator its create never happened.
			return &command.LinkResult{Link: old}, nil
		}
		if !old.Deleted || !faultReuseTombstone() {
			return &command.LinkResult{Err: link.ErrAliasTaken}, nil
		}
	}
	return f.linkResult(tx, old, c.NewLink(index))
}

func (f *ShardFSM) applyUpdate(tx *bolt.Tx, u *command.Update, index uint64) (any, error) {
	l, err := getLink(tx, u.Code)
	if err != nil {
		return nil, err
	}
	if err := live(l); err != nil {
		return &command.LinkResult{Err: err}, nil
	}
	old := l.Clone() // what the index holds
	u.Patch.ApplyTo(l)
	l.UpdatedAt = u.Now
	l.Version = index
	return f.linkResult(tx, old, l)
}

func (f *ShardFSM) applyConsumeVisit(tx *bolt.Tx, c *command.ConsumeVisit, index uint64) (any, error) {
	l, err := getLink(tx, c.Code)
	switch {
	case err != nil:
		return nil, err
	case live(l) != nil:
		return &command.LinkResult{Err: live(l)}, nil
	case l.MaxVisits == 0:
		return &command.LinkResult{Link: l}, nil // no limit: nothing to count
	}
	// Granted nonces are kept per link: at most MaxVisits of them.
	granted := tx.Bucket(bucketVisitNonces)
	key := binary.BigEndian.AppendUint64(append([]byte(c.Code), 0), c.Nonce)
	if c.Nonce != 0 && granted.Get(key) != nil {
		return &command.LinkResult{Link: l}, nil // the same visit, retried
	}
	if l.OutOfVisits() {
		return &command.LinkResult{Err: link.ErrGone}, nil
	}
	old := *l
	l.Visits++
	l.Version = index
	if err := f.putLink(tx, &old, l); err != nil {
		return nil, err
	}
	if c.Nonce != 0 {
		if err := granted.Put(key, []byte{1}); err != nil {
			return nil, fmt.Errorf("put visit nonce: %w", err)
		}
	}
	return &command.LinkResult{Link: l}, nil
}

func (f *ShardFSM) applyDelete(tx *bolt.Tx, d *command.Delete, index uint64) (any, error) {
	l, err := getLink(tx, d.Code)
	if err != nil {
		return nil, err
	}
	if err := live(l); err != nil {
		return &command.LinkResult{Err: err}, nil
	}
	tomb := &link.Link{
		Code:      l.Code,
		Owner:     l.Owner,
		CreatedAt: l.CreatedAt,
		UpdatedAt: d.Now,
		Redirect:  l.Redirect,
		Nonce:     l.Nonce, // a late retry of the create still recognises it
		Deleted:   true,
		Version:   index,
	}
	return f.linkResult(tx, l, tomb)
}

// Get returns the stored link for code, tombstones included, or
// link.ErrNotFound. It reads the local file: on a follower it may lag the
// leader.
func (f *ShardFSM) Get(code string) (*link.Link, error) {
	if f.pending != nil {
		// Changed since the last commit: the newest state is here. A
		// code not here has its newest state in the file.
		f.pendingMu.RLock()
		l, ok := f.pending[code]
		f.pendingMu.RUnlock()
		if ok {
			return l, nil
		}
	}
	var l *link.Link
	err := f.viewCommitted(func(tx *bolt.Tx) (err error) {
		l, err = getLink(tx, code)
		return err
	})
	if err != nil {
		return nil, err
	}
	if l == nil {
		return nil, link.ErrNotFound
	}
	return l, nil
}

// Scan calls fn for every stored link with a code of at least from, in code
// order, until fn returns false. Tombstones are included.
func (f *ShardFSM) Scan(from string, fn func(l *link.Link) bool) error {
	return f.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketLinks).Cursor()
		k, v := c.Seek([]byte(from))
		for ; k != nil; k, v = c.Next() {
			if bytes.Compare(k, []byte(from)) < 0 {
				continue
			}
			l, err := command.DecodeRecord(k, v)
			if err != nil {
				return fmt.Errorf("stored link %q: %w", k, err)
			}
			if !fn(l) {
				return nil
			}
		}
		return nil
	})
}

// Count returns the number of stored codes, tombstones included.
func (f *ShardFSM) Count() (int, error) {
	n := 0
	err := f.view(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucketLinks).Stats().KeyN
		return nil
	})
	return n, err
}
