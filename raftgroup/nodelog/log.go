package nodelog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// Log is one group's part of the node's log: a raft.LogStore and
// raft.StableStore. Close it when the group stops.
type Log struct {
	s      *Store
	name   string
	closed atomic.Bool
}

// Log returns group name's view of the log. The group is made by its
// first write. A name is not empty (its writes fail with errNoName).
func (s *Store) Log(name string) *Log { return &Log{s: s, name: name} }

// errNoName is the answer to a write of a view with an empty name.
var errNoName = errors.New("nodelog: a group needs a name")

// Path returns the log's directory.
func (l *Log) Path() string { return l.s.dir }

// FreeBytes records nothing: the log has no free pages that new writes
// reuse (a segment whose entries are all gone is deleted).
func (l *Log) FreeBytes(map[string]int64) {}

// Close closes the view (not the log): later calls fail with ErrClosed,
// and so do its writes still queued for the next sync.
func (l *Log) Close() error {
	l.closed.Store(true)
	return nil
}

// read runs fn on the group, nil if the log holds nothing for it, with the
// log's lock held shared.
func (l *Log) read(fn func(g *group) error) error {
	if l.closed.Load() {
		return ErrClosed
	}
	l.s.mu.RLock()
	defer l.s.mu.RUnlock()
	if l.s.segs == nil {
		return ErrClosed
	}
	return fn(l.s.groups[l.name])
}

// FirstIndex implements raft.LogStore: the first index held, 0 for none.
func (l *Log) FirstIndex() (uint64, error) {
	var i uint64
	err := l.read(func(g *group) error {
		if g != nil && len(g.locs) > 0 {
			i = g.first
		}
		return nil
	})
	return i, err
}

// LastIndex implements raft.LogStore: the last index held, 0 for none.
func (l *Log) LastIndex() (uint64, error) {
	var i uint64
	err := l.read(func(g *group) error {
		if g != nil {
			i = g.last()
		}
		return nil
	})
	return i, err
}

// GetLog implements raft.LogStore: entry index into out, or
// raft.ErrLogNotFound.
func (l *Log) GetLog(index uint64, out *raft.Log) error {
	var v []byte
	var at loc
	err := l.read(func(g *group) error {
		if g == nil || len(g.locs) == 0 || index < g.first || index > g.last() {
			return raft.ErrLogNotFound
		}
		at = g.locs[index-g.first]
		v = make([]byte, at.n)
		_, err := at.seg.f.ReadAt(v, at.off)
		return err
	})
	if err != nil {
		return err
	}
	if err := decodeLog(v, out); err != nil {
		return fmt.Errorf("raft log %s at offset %d, group %s, entry %d: %w", at.seg.path, at.off, l.name, index, err)
	}
	out.Index = index
	return nil
}

// Size returns how many entries the group's log holds and their bytes as
// encoded in the segments (record headers aside).
func (l *Log) Size() (entries int, bytes int64, err error) {
	err = l.read(func(g *group) error {
		if g == nil {
			return nil
		}
		entries = len(g.locs)
		for _, at := range g.locs {
			bytes += int64(at.n)
		}
		return nil
	})
	return entries, bytes, err
}

// StoreLog implements raft.LogStore.
func (l *Log) StoreLog(e *raft.Log) error { return l.StoreLogs([]*raft.Log{e}) }

// StoreLogs implements raft.LogStore: the entries are durable when it
// returns. They are encoded here, outside the committer. Entries that do
// not follow on from the log's last replace what they overlap, or, past a
// gap, the whole log.
func (l *Log) StoreLogs(entries []*raft.Log) error {
	if len(entries) == 0 {
		return nil
	}
	if l.closed.Load() {
		return ErrClosed
	}
	ents := make([][]byte, len(entries))
	size := 0
	for i, e := range entries {
		if i > 0 && e.Index != entries[i-1].Index+1 {
			return fmt.Errorf("nodelog: group %s: entries %d and %d are not consecutive", l.name, entries[i-1].Index, e.Index)
		}
		ents[i] = encodeLog(e)
		size += len(ents[i]) + binary.MaxVarintLen64
	}
	if size > maxRecord/2 {
		return fmt.Errorf("nodelog: group %s: %d bytes of entries in one append, over %d", l.name, size, maxRecord/2)
	}
	if entries[0].Index == 0 {
		return errors.New("nodelog: an entry at index 0")
	}
	return l.s.do(&request{kind: opEntries, view: l, name: l.name, first: entries[0].Index, ents: ents})
}

// DeleteRange implements raft.LogStore: the entries from lo to hi
// inclusive, which must take in the log's first or last entry.
func (l *Log) DeleteRange(lo, hi uint64) error {
	if l.closed.Load() {
		return ErrClosed
	}
	return l.s.do(&request{kind: opDelete, view: l, name: l.name, lo: lo, hi: hi})
}

// Set implements raft.StableStore.
func (l *Log) Set(key, val []byte) error {
	if len(key) == 0 {
		return errors.New("nodelog: empty key")
	}
	if l.closed.Load() {
		return ErrClosed
	}
	return l.s.do(&request{kind: opStable, view: l, name: l.name, key: append([]byte(nil), key...), val: append([]byte(nil), val...)})
}

// Get implements raft.StableStore: ErrKeyNotFound for a key never set.
func (l *Log) Get(key []byte) ([]byte, error) {
	var out []byte
	err := l.read(func(g *group) error {
		v, ok := []byte(nil), false
		if g != nil {
			v, ok = g.stable[string(key)]
		}
		if !ok {
			return ErrKeyNotFound
		}
		out = append([]byte(nil), v...)
		return nil
	})
	return out, err
}

// SetUint64 implements raft.StableStore (8 bytes, big-endian, as
// raft-boltdb stores them).
func (l *Log) SetUint64(key []byte, val uint64) error {
	return l.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 implements raft.StableStore.
func (l *Log) GetUint64(key []byte) (uint64, error) {
	v, err := l.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("raft log %s, group %s: stable key %q holds %d bytes, not 8", l.s.dir, l.name, key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}
