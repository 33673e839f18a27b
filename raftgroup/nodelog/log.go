package nodelog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

// The buckets inside a group's bucket: its entries by index (8-byte
// big-endian keys), and its stable store (raft's current term and vote).
var (
	bucketLogs = []byte("logs")
	bucketConf = []byte("conf")
)

// Log is one group's log and stable store in the node's file: a
// raft.LogStore and raft.StableStore. Close it when the group stops.
type Log struct {
	s      *Store
	name   []byte
	closed atomic.Bool
}

// Log returns group name's view of the file. Its bucket is made by its
// first write.
func (s *Store) Log(name string) *Log { return &Log{s: s, name: []byte(name)} }

// Path returns the file's path.
func (l *Log) Path() string { return l.s.path }

// FreeBytes sets into[path] to the free-page bytes of the node's file
// (the same for every group's view, so set, not added).
func (l *Log) FreeBytes(into map[string]int64) { into[l.s.path] = l.s.FreeBytes() }

// Close closes the view (not the file): later calls fail with ErrClosed,
// and so do its writes still queued for the next commit.
func (l *Log) Close() error {
	l.closed.Store(true)
	return nil
}

// view runs fn on the group's bucket named sub, nil if never written.
func (l *Log) view(sub []byte, fn func(b *bolt.Bucket) error) error {
	if l.closed.Load() {
		return ErrClosed
	}
	return l.s.db.View(func(tx *bolt.Tx) error {
		var b *bolt.Bucket
		if g := tx.Bucket(l.name); g != nil {
			b = g.Bucket(sub)
		}
		return fn(b)
	})
}

// update runs fn on the group's bucket named sub (made if missing) in the
// next commit, and returns once it is durable.
func (l *Log) update(sub []byte, fn func(b *bolt.Bucket) error) error {
	if l.closed.Load() {
		return ErrClosed
	}
	return l.s.write(func(tx *bolt.Tx) error {
		// Checked again in the commit: a write queued before Close must
		// not bring back a bucket dropped after it.
		if l.closed.Load() {
			return ErrClosed
		}
		g, err := tx.CreateBucketIfNotExists(l.name)
		if err != nil {
			return err
		}
		b, err := g.CreateBucketIfNotExists(sub)
		if err != nil {
			return err
		}
		return fn(b)
	})
}

// FirstIndex implements raft.LogStore: the first index written, 0 for none.
func (l *Log) FirstIndex() (uint64, error) { return l.edge((*bolt.Cursor).First) }

// LastIndex implements raft.LogStore: the last index written, 0 for none.
func (l *Log) LastIndex() (uint64, error) { return l.edge((*bolt.Cursor).Last) }

// edge is the index of the entry a cursor's move to one end finds, 0 for
// an empty log.
func (l *Log) edge(move func(*bolt.Cursor) ([]byte, []byte)) (uint64, error) {
	var i uint64
	err := l.view(bucketLogs, func(b *bolt.Bucket) error {
		if b != nil {
			if k, _ := move(b.Cursor()); k != nil {
				i = binary.BigEndian.Uint64(k)
			}
		}
		return nil
	})
	return i, err
}

// GetLog implements raft.LogStore: entry index into out, or
// raft.ErrLogNotFound.
func (l *Log) GetLog(index uint64, out *raft.Log) error {
	return l.view(bucketLogs, func(b *bolt.Bucket) error {
		var v []byte
		if b != nil {
			v = b.Get(binary.BigEndian.AppendUint64(nil, index))
		}
		if v == nil {
			return raft.ErrLogNotFound
		}
		if err := decodeLog(v, out); err != nil {
			return fmt.Errorf("raft log %s, group %s, entry %d: %w", l.s.path, l.name, index, err)
		}
		out.Index = index
		return nil
	})
}

// StoreLog implements raft.LogStore.
func (l *Log) StoreLog(e *raft.Log) error { return l.StoreLogs([]*raft.Log{e}) }

// StoreLogs implements raft.LogStore: the entries are durable when it
// returns. They are encoded here, outside the shared commit.
func (l *Log) StoreLogs(entries []*raft.Log) error {
	keys := make([][]byte, len(entries))
	vals := make([][]byte, len(entries))
	for i, e := range entries {
		keys[i] = binary.BigEndian.AppendUint64(nil, e.Index)
		vals[i] = encodeLog(e)
	}
	return l.update(bucketLogs, func(b *bolt.Bucket) error {
		for i := range keys {
			if err := b.Put(keys[i], vals[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// DeleteRange implements raft.LogStore: the entries from lo to hi
// inclusive.
func (l *Log) DeleteRange(lo, hi uint64) error {
	return l.update(bucketLogs, func(b *bolt.Bucket) error {
		var keys [][]byte
		c := b.Cursor()
		for k, _ := c.Seek(binary.BigEndian.AppendUint64(nil, lo)); k != nil && binary.BigEndian.Uint64(k) <= hi; k, _ = c.Next() {
			keys = append(keys, k)
		}
		for _, k := range keys {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}

// Set implements raft.StableStore.
func (l *Log) Set(key, val []byte) error {
	if len(key) == 0 {
		return errors.New("nodelog: empty key")
	}
	val = append([]byte(nil), val...)
	return l.update(bucketConf, func(b *bolt.Bucket) error { return b.Put(key, val) })
}

// Get implements raft.StableStore: ErrKeyNotFound for a key never set.
func (l *Log) Get(key []byte) ([]byte, error) {
	var out []byte
	err := l.view(bucketConf, func(b *bolt.Bucket) error {
		var v []byte
		if b != nil {
			v = b.Get(key)
		}
		if v == nil {
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
		return 0, fmt.Errorf("raft log %s, group %s: stable key %q holds %d bytes, not 8", l.s.path, l.name, key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// entryVersion is the first byte of every encoded entry.
const entryVersion = 1

// encodeLog is e without its index (the key): version, term, type, the
// time it was appended (Unix nanoseconds, 0 for none), then data and
// extensions, each after its length as a uvarint.
func encodeLog(e *raft.Log) []byte {
	b := make([]byte, 0, 1+8+1+8+2*binary.MaxVarintLen64+len(e.Data)+len(e.Extensions))
	b = append(b, entryVersion)
	b = binary.BigEndian.AppendUint64(b, e.Term)
	b = append(b, byte(e.Type))
	var at int64
	if !e.AppendedAt.IsZero() {
		at = e.AppendedAt.UnixNano()
	}
	b = binary.BigEndian.AppendUint64(b, uint64(at))
	b = binary.AppendUvarint(b, uint64(len(e.Data)))
	b = append(b, e.Data...)
	b = binary.AppendUvarint(b, uint64(len(e.Extensions)))
	return append(b, e.Extensions...)
}

// errCorrupt says an entry's bytes do not decode.
var errCorrupt = errors.New("damaged entry")

// decodeLog decodes v (encodeLog's) into out, copying every byte out of v
// (bbolt's memory is only valid inside its transaction).
func decodeLog(v []byte, out *raft.Log) error {
	if len(v) < 18 || v[0] != entryVersion {
		return errCorrupt
	}
	out.Term = binary.BigEndian.Uint64(v[1:])
	out.Type = raft.LogType(v[9])
	out.AppendedAt = time.Time{}
	if at := int64(binary.BigEndian.Uint64(v[10:])); at != 0 {
		out.AppendedAt = time.Unix(0, at)
	}
	rest := v[18:]
	var err error
	if out.Data, rest, err = chunk(rest); err != nil {
		return err
	}
	if out.Extensions, rest, err = chunk(rest); err != nil {
		return err
	}
	if len(rest) != 0 {
		return errCorrupt
	}
	return nil
}

// chunk reads one length-prefixed byte string off b: a copy (nil when
// empty) and what follows it.
func chunk(b []byte) ([]byte, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, errCorrupt
	}
	b = b[k:]
	if n == 0 {
		return nil, b, nil
	}
	return append([]byte(nil), b[:n]...), b[n:], nil
}
