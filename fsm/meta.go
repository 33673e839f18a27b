package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/wire"
)

var (
	bucketSettings = []byte("settings")
	bucketIDs      = []byte("ids")
	bucketLeases   = []byte("leases")       // start -> end, node: grants before lease-grants existed
	bucketGrants   = []byte("lease-grants") // Raft index -> start, end, node: every grant
	keyCluster     = []byte("cluster")
	keyNextID      = []byte("next")
	keyPlacement   = []byte("placement")
)

// MetaFSM is the control-plane state machine: cluster settings and the next
// free ID.
type MetaFSM struct {
	*store
	// keysChanged is set by an apply that touched the keys or the
	// blocklist (FSM goroutine only); keysVersion is bumped after its
	// commit, so that a cache reloading on a new version reads the
	// committed state.
	keysChanged bool
	keysVersion atomic.Uint64
}

// MetaConfig configures a MetaFSM.
type MetaConfig struct {
	// Path of the bbolt file; created if missing.
	Path string
	// Logger receives rejected entries and apply stalls (may be nil).
	Logger *slog.Logger
}

// NewMetaFSM opens (or creates) the meta bbolt file.
func NewMetaFSM(cfg MetaConfig) (*MetaFSM, error) {
	f := &MetaFSM{}
	s, err := openStore(cfg.Path, command.GroupMeta, [][]byte{bucketSettings, bucketIDs, bucketLeases, bucketGrants, bucketMembers, bucketKeys, bucketBlocked}, f.applyCommand, nil, cfg.Logger, 0)
	if err != nil {
		return nil, err
	}
	f.store = s
	s.beforeBatch = func() { f.keysChanged = false }
	s.afterApply = func() {
		if f.keysChanged {
			f.keysVersion.Add(1)
		}
	}
	s.onRestore = func() { f.keysVersion.Add(1) }
	return f, nil
}

// applyCommand applies a command the registry decoded and validated.
func (f *MetaFSM) applyCommand(tx *bolt.Tx, typ command.Type, v any, index uint64) (any, error) {
	switch c := v.(type) {
	case *command.SetSettings:
		return f.applySetSettings(tx, &c.Settings)
	case *command.LeaseRange:
		return f.applyLease(tx, c, index)
	case *command.SetPlacement:
		return f.applyPlacement(tx, &c.Placement, index)
	case *command.RegisterNode:
		return f.applyRegister(tx, c)
	case *command.AdmitNode:
		return f.applyAdmit(tx, c)
	case *command.CreateKey:
		return f.applyCreateKey(tx, c)
	case *command.RevokeKey:
		return f.applyRevokeKey(tx, c)
	case *command.SetBlocked:
		return f.applySetBlocked(tx, c)
	}
	return f.reject(index, typ, fmt.Errorf("%w: no meta apply for %T", wire.ErrDecode, v)), nil
}

func (f *MetaFSM) applySetSettings(tx *bolt.Tx, s *command.Settings) (any, error) {
	b := tx.Bucket(bucketSettings)
	if v := b.Get(keyCluster); v != nil {
		old := new(command.Settings)
		if err := old.Unmarshal(v); err != nil {
			return nil, corrupt("stored settings: %w", err)
		}
		return &command.SettingsResult{Settings: old}, nil
	}
	if err := b.Put(keyCluster, s.AppendTo(nil)); err != nil {
		return nil, fmt.Errorf("put settings: %w", err)
	}
	return &command.SettingsResult{Settings: s}, nil
}

func (f *MetaFSM) applyLease(tx *bolt.Tx, l *command.LeaseRange, index uint64) (any, error) {
	if l.N == 0 || l.N > command.MaxLease {
		return &command.LeaseResult{Err: fmt.Errorf("lease of %d ids: must be 1 to %d", l.N, command.MaxLease)}, nil
	}
	b := tx.Bucket(bucketIDs)
	var next uint64
	if v := b.Get(keyNextID); len(v) == 8 {
		next = binary.BigEndian.Uint64(v)
	}
	end := next + l.N
	if end < next {
		return &command.LeaseResult{Err: fmt.Errorf("id space exhausted")}, nil
	}
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], end)
	if err := b.Put(keyNextID, buf[:]); err != nil {
		return nil, fmt.Errorf("put next id: %w", err)
	}
	// Every grant is kept under the index of the entry that made it (24
	// bytes plus the node ID): the whole history, so an operator or the
	// chaos harness can check that no two ranges ever overlapped, even if
	// a bug granted one start twice.
	var key [8]byte
	binary.BigEndian.PutUint64(key[:], index)
	rec := binary.BigEndian.AppendUint64(nil, next)
	rec = binary.BigEndian.AppendUint64(rec, end)
	rec = append(rec, l.Node...)
	if err := tx.Bucket(bucketGrants).Put(key[:], rec); err != nil {
		return nil, fmt.Errorf("put lease: %w", err)
	}
	return &command.LeaseResult{Start: next, End: end}, nil
}

// Lease is one ID range granted by LeaseRange: [Start, End) to Node, by the
// meta log entry at Index (0 for grants recorded before the index was).
type Lease struct {
	Index uint64
	Start uint64
	End   uint64
	Node  string
}

// Leases returns every grant this replica has applied: the older records
// (kept by start, Index 0) in ID order, then every later grant in log order.
func (f *MetaFSM) Leases() ([]Lease, error) {
	var out []Lease
	err := f.view(func(tx *bolt.Tx) error {
		return forEachLease(tx, func(l Lease) error {
			out = append(out, l)
			return nil
		})
	})
	return out, err
}

func forEachLease(tx *bolt.Tx, fn func(Lease) error) error {
	err := tx.Bucket(bucketLeases).ForEach(func(k, v []byte) error {
		if len(k) != 8 || len(v) < 8 {
			return errors.New("malformed lease record")
		}
		return fn(Lease{Start: binary.BigEndian.Uint64(k), End: binary.BigEndian.Uint64(v[:8]), Node: string(v[8:])})
	})
	if err != nil {
		return err
	}
	return tx.Bucket(bucketGrants).ForEach(func(k, v []byte) error {
		if len(k) != 8 || len(v) < 16 {
			return errors.New("malformed lease grant")
		}
		return fn(Lease{Index: binary.BigEndian.Uint64(k), Start: binary.BigEndian.Uint64(v[:8]),
			End: binary.BigEndian.Uint64(v[8:16]), Node: string(v[16:])})
	})
}

// Settings returns the stored cluster settings, or nil before bootstrap.
func (f *MetaFSM) Settings() (*command.Settings, error) {
	var s *command.Settings
	err := f.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketSettings).Get(keyCluster)
		if v == nil {
			return nil
		}
		s = new(command.Settings)
		return s.Unmarshal(v)
	})
	return s, err
}

// NextID returns the first ID not yet leased to anyone.
func (f *MetaFSM) NextID() (uint64, error) {
	var next uint64
	err := f.view(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketIDs).Get(keyNextID); len(v) == 8 {
			next = binary.BigEndian.Uint64(v)
		}
		return nil
	})
	return next, err
}

func getPlacement(tx *bolt.Tx) (*command.Placement, error) {
	v := tx.Bucket(bucketSettings).Get(keyPlacement)
	if v == nil {
		return nil, nil
	}
	p := new(command.Placement)
	if err := p.Unmarshal(v); err != nil {
		return nil, err
	}
	return p, nil
}

func (f *MetaFSM) applyPlacement(tx *bolt.Tx, p *command.Placement, index uint64) (any, error) {
	cur, err := getPlacement(tx)
	if err != nil {
		return nil, corrupt("stored placement: %w", err)
	}
	// The shard count is fixed at bootstrap: a placement of another count
	// would leave shards on no node, or nodes on shards that do not exist.
	if v := tx.Bucket(bucketSettings).Get(keyCluster); v != nil {
		var st command.Settings
		if err := st.Unmarshal(v); err == nil && int(st.Shards) != len(p.Shards) {
			return f.reject(index, command.TypeSetPlacement, fmt.Errorf("%w: placement of %d shards in a cluster of %d", wire.ErrDecode, len(p.Shards), st.Shards)), nil
		}
	}
	var curVersion uint64
	if cur != nil {
		curVersion = cur.Version
	}
	if p.Version != curVersion+1 {
		return &command.PlacementResult{Placement: cur, Err: command.ErrStalePlacement}, nil
	}
	if err := tx.Bucket(bucketSettings).Put(keyPlacement, p.AppendTo(nil)); err != nil {
		return nil, fmt.Errorf("put placement: %w", err)
	}
	return &command.PlacementResult{Placement: p}, nil
}

// Placement returns the stored placement, or nil before the first one.
func (f *MetaFSM) Placement() (*command.Placement, error) {
	var p *command.Placement
	err := f.view(func(tx *bolt.Tx) error {
		var err error
		p, err = getPlacement(tx)
		return err
	})
	return p, err
}
