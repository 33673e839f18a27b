package shard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/maypok86/otter/v2"
	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/internal/status"
	"github.com/linkraft/linkraft/link"
	"github.com/linkraft/linkraft/raftgroup"
	"github.com/linkraft/linkraft/raftgroup/nodelog"
)

// DefaultCommitInterval is how long a node lets applied entries wait
// before a shard's state file commits them (fsm.DefaultCommitInterval).
const DefaultCommitInterval = fsm.DefaultCommitInterval

// Config configures a link Shard.
type Config struct {
	// ID is the shard id (0 ≤ ID < shard count).
	ID command.ShardID
	// Group configures the shard's Raft group (its Dir holds the shard's
	// snapshots/ and state.db, and raft.db unless Group.Log is set); Open
	// sets its Name and FSM.
	Group raftgroup.Config
	// CacheSize bounds the link cache (entries, default 100,000).
	CacheSize int
	// CacheTTL bounds how long a cached link is served without a re-read
	// (default 5 min). Apply updates the cache in place, so on a replica
	// the TTL only bounds memory held by cold entries.
	CacheTTL time.Duration
	// NegativeTTL is how long an unknown code is remembered (default 2 s).
	NegativeTTL time.Duration
	// Observer, if set, is told about cache hits and misses.
	Observer Observer
	// OnChange, if set, is called on the FSM goroutine after every applied
	// change (after the cache has it). Keep it short and non-blocking.
	OnChange func(shard command.ShardID, l *link.Link)
	// CommitInterval is fsm.ShardConfig's: how long applied entries may
	// wait before the state file commits them (0: every batch).
	CommitInterval time.Duration
}

// Observer receives a shard's measurements (implemented by the metrics
// layer). The shard reports cache hits and misses; the cluster's write
// path reports Applied, the latency of a write proposed on the shard's
// leader, and Relayed, a write forwarded to this node that it passed on to
// another (a second hop: writes from a node without a replica go straight
// to the leader it last saw).
type Observer interface {
	CacheHit(shard int)
	CacheMiss(shard int)
	Applied(shard int, d time.Duration)
	Relayed(shard int)
}

// Shard is one shard: a Raft group whose FSM holds the shard's links in its
// own bbolt file, plus a W-TinyLFU cache of links in front of that file.
type Shard struct {
	id    command.ShardID
	group *raftgroup.Group
	fsm   *fsm.ShardFSM
	cache *otter.Cache[string, entry]
	obs   Observer
	// restores counts snapshot restores; a read that spans one must not
	// fill the cache.
	restores atomic.Uint64
	onChange func(command.ShardID, *link.Link)
}

// entry is a cached answer: a link (tombstones included) or, with l == nil,
// "unknown as of FSM index version".
type entry struct {
	l       *link.Link
	version uint64
}

// newer reports whether e should replace old.
func (e entry) newer(old entry) bool { return e.version >= old.version }

type nopObserver struct{}

func (nopObserver) CacheHit(int)               {}
func (nopObserver) CacheMiss(int)              {}
func (nopObserver) Applied(int, time.Duration) {}
func (nopObserver) Relayed(int)                {}

// Open opens the shard's state file and starts its Raft group.
func Open(cfg Config) (*Shard, error) {
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = 100_000
	}
	if cfg.CacheTTL <= 0 {
		cfg.CacheTTL = 5 * time.Minute
	}
	if cfg.NegativeTTL <= 0 {
		cfg.NegativeTTL = 2 * time.Second
	}
	s := &Shard{id: cfg.ID, obs: cfg.Observer, onChange: cfg.OnChange}
	if s.obs == nil {
		s.obs = nopObserver{}
	}
	ttl, negTTL := cfg.CacheTTL, cfg.NegativeTTL
	cache, err := otter.New(&otter.Options[string, entry]{
		MaximumSize: cfg.CacheSize,
		ExpiryCalculator: otter.ExpiryWritingFunc(func(e otter.Entry[string, entry]) time.Duration {
			if e.Value.l == nil {
				return negTTL
			}
			return ttl
		}),
	})
	if err != nil {
		return nil, err
	}
	s.cache = cache
	if cfg.Group.Logger == nil {
		cfg.Group.Logger = slog.New(slog.DiscardHandler)
	}
	f, err := fsm.NewShardFSM(fsm.ShardConfig{
		Path:           StatePath(cfg.Group.Dir),
		Logger:         cfg.Group.Logger.With("group", cfg.ID.Group().String()),
		OnChange:       s.applied,
		OnRestore:      func() { s.restores.Add(1); s.cache.InvalidateAll() },
		CommitInterval: cfg.CommitInterval,
	})
	if err != nil {
		return nil, err
	}
	s.fsm = f
	cfg.Group.Name, cfg.Group.FSM = cfg.ID.Group().String(), f
	g, err := raftgroup.Open(cfg.Group)
	if err != nil {
		f.Close()
		return nil, err
	}
	s.group = g
	return s, nil
}

// Recover rewrites the configuration of the stopped replica of shard id
// in dir to the servers in keep, after its group lost a majority for good
// (raftgroup.Recover). nodeID is this replica's node; log is its view of
// the node's shared log, nil when it has its own raft.db in dir.
func Recover(id command.ShardID, dir, nodeID string, keep []string, log *nodelog.Log) ([]raftgroup.Server, error) {
	f, err := fsm.NewShardFSM(fsm.ShardConfig{Path: StatePath(dir)})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("%s: %w", dir, raftgroup.ErrInUse)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return raftgroup.Recover(raftgroup.Config{Name: id.Group().String(), NodeID: nodeID, Dir: dir, Log: log, FSM: f}, keep)
}

// StatePath is the shard state file in a shard's Dir.
func StatePath(dir string) string { return filepath.Join(dir, "state.db") }

// applied is the FSM's OnChange hook: the cache learns every change in apply
// order, so a replica never serves a link older than its own state.
func (s *Shard) applied(l *link.Link) {
	e := entry{l: l, version: l.Version}
	s.cache.Compute(l.Code, func(old entry, found bool) (entry, otter.ComputeOp) {
		if found && (!e.newer(old) || old.l != nil && faultNoInvalidate()) {
			return old, otter.CancelOp
		}
		return e, otter.WriteOp
	})
	if s.onChange != nil {
		s.onChange(s.id, l)
	}
}

// fill caches what a reader loaded from the file. The reader noted the
// applied index and the restore count before its read transaction. If the
// cache holds an entry, the newer version wins. If it holds none, the entry
// written by a concurrent apply may already have been evicted, so the
// loaded state is cached only if nothing was applied or restored since the
// read began; otherwise it is simply not cached.
func (s *Shard) fill(code string, e entry, appliedBefore, restoresBefore uint64) {
	s.cache.Compute(code, func(old entry, found bool) (entry, otter.ComputeOp) {
		if found {
			if e.newer(old) && s.restores.Load() == restoresBefore {
				return e, otter.WriteOp
			}
			return old, otter.CancelOp
		}
		if s.fsm.AppliedIndex() != appliedBefore || s.restores.Load() != restoresBefore {
			return old, otter.CancelOp
		}
		return e, otter.WriteOp
	})
}

// Restores returns how many snapshots this replica has installed since it
// opened.
func (s *Shard) Restores() uint64 { return s.restores.Load() }

// ID returns the shard id.
func (s *Shard) ID() command.ShardID { return s.id }

// Group returns the shard's Raft group.
func (s *Shard) Group() *raftgroup.Group { return s.group }

// Reads of the state file, not the cache: they answer as of this
// replica's applied index (on a follower it may lag the leader).

// Read returns the stored link for code, tombstones included, or
// link.ErrNotFound.
func (s *Shard) Read(code string) (*link.Link, error) { return s.fsm.Get(code) }

// Scan calls fn for every stored link with a code of at least from, in
// code order, until fn returns false. Tombstones are included.
func (s *Shard) Scan(from string, fn func(l *link.Link) bool) error { return s.fsm.Scan(from, fn) }

// List returns this shard's part of a listing (fsm.ShardFSM.ListLinks).
func (s *Shard) List(q link.ListQuery) (link.ListPart, error) { return s.fsm.ListLinks(q) }

// TagCounts counts the tags of this shard's live links, owner's or every
// owner's.
func (s *Shard) TagCounts(owner string) (map[string]uint64, error) { return s.fsm.TagCounts(owner) }

// Clicks reads code's click totals and its hourly counts in [from, to).
func (s *Shard) Clicks(code string, from, to time.Time) (*command.ClickStats, error) {
	return s.fsm.Clicks(code, from, to)
}

// Dump reads the shard's records after code after, each with its clicks,
// until about budget bytes (fsm.ShardFSM.Dump): a part of a backup.
func (s *Shard) Dump(after string, budget int) ([]command.RestoredLink, bool, error) {
	return s.fsm.Dump(after, budget)
}

// StateSize returns the bytes of the shard's state file in use, as last
// committed.
func (s *Shard) StateSize() int64 { return s.fsm.Size() }

// Count returns the number of stored codes, tombstones included.
func (s *Shard) Count() (int, error) { return s.fsm.Count() }

// Digest sums up this replica (fsm.ShardFSM.Digest).
func (s *Shard) Digest() (status.Digest, error) {
	d, err := s.fsm.Digest()
	return status.Digest{Group: s.id.String(), AppliedIndex: d.AppliedIndex, Items: d.Items, Sum: d.Sum}, err
}

// AppliedIndex is the last Raft index whose effects are in the file.
func (s *Shard) AppliedIndex() uint64 { return s.fsm.AppliedIndex() }

// Health is what the state machine says of its apply loop.
func (s *Shard) Health() status.Health { return s.fsm.Health() }

// Lookup returns the link for code from this replica: cache, then the local
// bbolt file. Tombstones are returned as links with Deleted set; an unknown
// code is link.ErrNotFound. On a follower the answer may lag the leader.
// cacheUnknown says whether an unknown code may be remembered as unknown
// (the caller passes true on the leader only); known links are always
// cached.
func (s *Shard) Lookup(code string, cacheUnknown bool) (*link.Link, error) {
	if e, ok := s.cache.GetIfPresent(code); ok && (e.l != nil || cacheUnknown) {
		s.obs.CacheHit(int(s.id))
		if e.l == nil {
			return nil, link.ErrNotFound
		}
		return e.l, nil
	}
	s.obs.CacheMiss(int(s.id))
	restores := s.restores.Load()
	applied := s.fsm.AppliedIndex() // before the read: a lower bound of its state
	l, err := s.fsm.Get(code)
	switch {
	case err == nil:
		s.fill(code, entry{l: l, version: l.Version}, applied, restores)
		return l, nil
	case errors.Is(err, link.ErrNotFound):
		if cacheUnknown {
			s.fill(code, entry{version: applied}, applied, restores)
		}
		return nil, err
	}
	return nil, err
}

// LookupConsistent is a linearizable Lookup: it must run on the leader
// (link.ErrNotLeader otherwise) and reads the file after VerifyRead.
func (s *Shard) LookupConsistent(ctx context.Context, code string) (*link.Link, error) {
	if err := s.group.VerifyRead(ctx); err != nil {
		return nil, err
	}
	return s.fsm.Get(code)
}

// Close stops the Raft group and closes the files.
func (s *Shard) Close() error {
	err := s.group.Close()
	s.cache.StopAllGoroutines()
	return err
}
