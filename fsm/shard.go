package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"

	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/bugs"
	"github.com/linkraft/linkraft/internal/wire"
	"github.com/linkraft/linkraft/link"
)

var (
	bucketLinks       = []byte("links")
	bucketVisitNonces = []byte("visit-nonces") // code 0x00 nonce(8) of granted visits
)

// Result is the response of every shard command, as returned by
// raft.ApplyFuture.Response. Err is a business error (link.ErrAliasTaken,
// link.ErrNotFound); Link is the state after the command.
type Result struct {
	Link *link.Link
	Err  error
}

// ShardConfig configures a ShardFSM.
type ShardConfig struct {
	// Path of the bbolt file; created if missing.
	Path string
	// OnChange, if set, is called after each committed batch with every link
	// the batch changed (tombstones included), in apply order. The shard
	// uses it to update its cache. It runs on the FSM goroutine: keep it
	// short.
	OnChange func(l *link.Link)
	// OnRestore, if set, is called after a snapshot replaced the state.
	OnRestore func()
	// Logger receives rejected entries and apply stalls (may be nil).
	Logger *slog.Logger
}

// ShardFSM is the state machine of one shard: code → link, in bbolt.
type ShardFSM struct {
	*store
	onChange func(*link.Link)
	changed  []*link.Link // filled during a batch, drained after commit
}

// NewShardFSM opens (or creates) the shard's bbolt file.
func NewShardFSM(cfg ShardConfig) (*ShardFSM, error) {
	f := &ShardFSM{onChange: cfg.OnChange}
	s, err := openStore(cfg.Path, command.GroupShard,
		[][]byte{bucketLinks, bucketVisitNonces, bucketClicks, bucketClickHours, bucketClickSeq, bucketByOwner, bucketByCreated, bucketByTag, bucketByClicks, bucketByClicksAll,
			bucketTagCounts, bucketTagCountsAll, bucketClaims, bucketClaimExpiry},
		f.applyCommand, buildIndexes, cfg.Logger)
	if err != nil {
		return nil, err
	}
	s.afterCommit = f.flushChanges
	s.beforeBatch = func() { // a retried commit starts its changes over
		clear(f.changed)
		f.changed = f.changed[:0]
	}
	s.onRestore = cfg.OnRestore
	f.store = s
	return f, nil
}

func (f *ShardFSM) flushChanges() {
	if f.onChange != nil {
		for _, l := range f.changed {
			f.onChange(l)
		}
	}
	clear(f.changed)
	f.changed = f.changed[:0]
}

// applyCommand applies a command the registry decoded and validated.
func (f *ShardFSM) applyCommand(tx *bolt.Tx, typ command.Type, v any, index uint64) any {
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
	}
	return f.reject(index, typ, fmt.Errorf("%w: no shard apply for %T", wire.ErrDecode, v))
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

func getLink(tx *bolt.Tx, code string) *link.Link {
	v := tx.Bucket(bucketLinks).Get([]byte(code))
	if v == nil {
		return nil
	}
	l, err := command.DecodeRecord([]byte(code), v)
	if err != nil {
		panic(fmt.Sprintf("fsm: stored link %q cannot be decoded: %v", code, err))
	}
	return l
}

// putLink stores l, whose stored form before is old (nil for none: the
// callers have read it already), and its index entries.
func (f *ShardFSM) putLink(tx *bolt.Tx, old, l *link.Link) {
	if bugs.On(bugs.LoseLastApply) {
		keepUndo(tx, l.Code)
	}
	if err := tx.Bucket(bucketLinks).Put([]byte(l.Code), command.EncodeRecord(l)); err != nil {
		panic(fmt.Sprintf("fsm %s: put %q: %v", f.path, l.Code, err))
	}
	if err := index(tx, old, l); err != nil {
		panic(fmt.Sprintf("fsm %s: index %q: %v", f.path, l.Code, err))
	}
	f.changed = append(f.changed, l.Clone())
}

func (f *ShardFSM) applyCreate(tx *bolt.Tx, c *command.CreateIfAbsent, index uint64) any {
	old := getLink(tx, c.Code)
	if old != nil {
		if c.Nonce != 0 && old.Nonce == c.Nonce {
			// The same create, retried after an unknown outcome: it took
			// effect, so it succeeds — even if the link was deleted since
			// (then the tombstone is returned). Answering "taken" would
			// tell the creator its create never happened.
			return &Result{Link: old}
		}
		if !old.Deleted || !bugs.On(bugs.TombstoneReuse) {
			return &Result{Err: link.ErrAliasTaken}
		}
	}
	redirect := c.Redirect
	if redirect == 0 {
		redirect = link.DefaultRedirect
	}
	l := &link.Link{
		Code:         c.Code,
		URL:          c.URL,
		Owner:        c.Owner,
		CreatedAt:    c.Now,
		UpdatedAt:    c.Now,
		ExpiresAt:    c.ExpiresAt,
		Redirect:     redirect,
		MaxVisits:    c.MaxVisits,
		Tags:         c.Tags,
		Nonce:        c.Nonce,
		DropQuery:    c.DropQuery,
		Title:        c.Title,
		Description:  c.Description,
		Version:      index,
		PasswordHash: c.PasswordHash,
		Rules:        c.Rules,
	}
	f.putLink(tx, old, l)
	return &Result{Link: l}
}

func (f *ShardFSM) applyUpdate(tx *bolt.Tx, u *command.Update, index uint64) any {
	l := getLink(tx, u.Code)
	if err := live(l); err != nil {
		return &Result{Err: err}
	}
	old := *l // what the index holds (the fields below are set in place)
	if u.Set&command.SetURL != 0 {
		l.URL = u.URL
	}
	if u.Set&command.SetExpiresAt != 0 {
		l.ExpiresAt = u.ExpiresAt
	}
	if u.Set&command.SetRedirect != 0 {
		l.Redirect = u.Redirect
	}
	if u.Set&command.SetDisabled != 0 {
		l.Disabled = u.Disabled
	}
	if u.Set&command.SetTags != 0 {
		l.Tags = u.Tags
	}
	if u.Set&command.SetDropQuery != 0 {
		l.DropQuery = u.DropQuery
	}
	if u.Set&command.SetTitle != 0 {
		l.Title = u.Title
	}
	if u.Set&command.SetDescription != 0 {
		l.Description = u.Description
	}
	if u.Set&command.SetPassword != 0 {
		l.PasswordHash = u.PasswordHash
	}
	if u.Set&command.SetRules != 0 {
		l.Rules = u.Rules
	}
	l.UpdatedAt = u.Now
	l.Version = index
	f.putLink(tx, &old, l)
	return &Result{Link: l}
}

func (f *ShardFSM) applyConsumeVisit(tx *bolt.Tx, c *command.ConsumeVisit, index uint64) any {
	l := getLink(tx, c.Code)
	switch {
	case live(l) != nil:
		return &Result{Err: live(l)}
	case l.MaxVisits == 0:
		return &Result{Link: l} // no limit: nothing to count
	}
	// Granted nonces are kept per link: at most MaxVisits of them.
	granted := tx.Bucket(bucketVisitNonces)
	key := binary.BigEndian.AppendUint64(append([]byte(c.Code), 0), c.Nonce)
	if c.Nonce != 0 && granted.Get(key) != nil {
		return &Result{Link: l} // the same visit, retried
	}
	if l.OutOfVisits() {
		return &Result{Err: link.ErrGone}
	}
	old := *l
	l.Visits++
	l.Version = index
	f.putLink(tx, &old, l)
	if c.Nonce != 0 {
		if err := granted.Put(key, []byte{1}); err != nil {
			panic(fmt.Sprintf("fsm %s: put visit nonce: %v", f.path, err))
		}
	}
	return &Result{Link: l}
}

func (f *ShardFSM) applyDelete(tx *bolt.Tx, d *command.Delete, index uint64) any {
	l := getLink(tx, d.Code)
	if err := live(l); err != nil {
		return &Result{Err: err}
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
	f.putLink(tx, l, tomb)
	return &Result{Link: tomb}
}

// Get returns the stored link for code, tombstones included, or
// link.ErrNotFound. It reads the local file: on a follower it may lag the
// leader.
func (f *ShardFSM) Get(code string) (*link.Link, error) {
	var l *link.Link
	err := f.view(func(tx *bolt.Tx) error {
		l = getLink(tx, code)
		return nil
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
