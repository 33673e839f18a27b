package nodelog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/internal/atomicfile"
	"github.com/linkraft/linkraft/internal/boltcheck"
)

// stableKeys are the keys hashicorp/raft keeps in its stable store: a
// raft-boltdb file cannot list its keys, so these are the ones copied.
var stableKeys = [][]byte{[]byte("CurrentTerm"), []byte("LastVoteTerm"), []byte("LastVoteCand")}

// exportChunk is how many entries Export reads and writes at a time.
const exportChunk = 256

// Import moves group name's log and stable store from the raft-boltdb file
// at path (one group's file, the layout before this package) into this
// file, replacing whatever the file held for name, then removes path. It
// is a no-op when path does not exist. The group must not be running.
//
// The copy is one transaction, and path is removed only after it commits:
// a crash in between leaves both, with the same contents, and the next
// Import (or Export) does its work again.
func (s *Store) Import(name, path string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := boltcheck.Check(path); err != nil {
		return fmt.Errorf("raft log %s: %w", path, err)
	}
	src, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bolt.Options{Timeout: time.Second}})
	if err != nil {
		return fmt.Errorf("raft log %s: %w", path, err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error { return importInto(tx, []byte(name), src) })
	if cerr := src.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("import %s into %s: %w", path, s.path, err)
	}
	if err := os.Remove(path); err != nil {
		return err
	}
	return atomicfile.SyncDir(filepath.Dir(path))
}

// importInto replaces group name's bucket in tx with src's entries and
// stable keys.
func importInto(tx *bolt.Tx, name []byte, src *raftboltdb.BoltStore) error {
	if err := tx.DeleteBucket(name); err != nil && !errors.Is(err, bolt.ErrBucketNotFound) {
		return err
	}
	g, err := tx.CreateBucket(name)
	if err != nil {
		return err
	}
	logs, err := g.CreateBucket(bucketLogs)
	if err != nil {
		return err
	}
	conf, err := g.CreateBucket(bucketConf)
	if err != nil {
		return err
	}
	first, err := src.FirstIndex()
	if err != nil {
		return err
	}
	last, err := src.LastIndex()
	if err != nil {
		return err
	}
	for i := first; i <= last && i > 0; i++ {
		var e raft.Log
		if err := src.GetLog(i, &e); errors.Is(err, raft.ErrLogNotFound) {
			continue
		} else if err != nil {
			return err
		}
		if err := logs.Put(binary.BigEndian.AppendUint64(nil, i), encodeLog(&e)); err != nil {
			return err
		}
	}
	for _, k := range stableKeys {
		v, err := src.Get(k)
		if errors.Is(err, raftboltdb.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if err := conf.Put(k, v); err != nil {
			return err
		}
	}
	return nil
}

// Export writes group name's log and stable store to a raft-boltdb file
// at path (for a version that keeps one file per group), then drops them
// from this file. It is a no-op when this file holds nothing for name. The
// group must not be running.
//
// The file is written beside path and renamed over it once synced; name is
// dropped only after that, so a crash leaves either the old state or both
// copies, the same, and the next Export (or Import) does its work again.
func (s *Store) Export(name, path string) error {
	ok, err := s.Has(name)
	if err != nil || !ok {
		return err
	}
	tmp := path + ".export"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	// Synced once, at the end, rather than at every chunk.
	dst, err := raftboltdb.New(raftboltdb.Options{Path: tmp, NoSync: true, BoltOptions: &bolt.Options{Timeout: time.Second}})
	if err != nil {
		return err
	}
	err = s.exportTo(name, dst)
	if err == nil {
		err = dst.Sync()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("export group %s of %s to %s: %w", name, s.path, path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if err := atomicfile.SyncDir(filepath.Dir(path)); err != nil {
		return err
	}
	return s.Drop(name)
}

// exportTo copies group name's entries, a chunk at a time, and its stable
// keys into dst.
func (s *Store) exportTo(name string, dst *raftboltdb.BoltStore) error {
	l := s.Log(name)
	next := uint64(0)
	for {
		var chunk []*raft.Log
		err := l.view(bucketLogs, func(b *bolt.Bucket) error {
			if b == nil {
				return nil
			}
			c := b.Cursor()
			for k, v := c.Seek(binary.BigEndian.AppendUint64(nil, next)); k != nil && len(chunk) < exportChunk; k, v = c.Next() {
				e := &raft.Log{}
				if err := decodeLog(v, e); err != nil {
					return fmt.Errorf("entry %d: %w", binary.BigEndian.Uint64(k), err)
				}
				e.Index = binary.BigEndian.Uint64(k)
				chunk = append(chunk, e)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if len(chunk) == 0 {
			break
		}
		if err := dst.StoreLogs(chunk); err != nil {
			return err
		}
		next = chunk[len(chunk)-1].Index + 1
	}
	return l.view(bucketConf, func(b *bolt.Bucket) error {
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error { return dst.Set(k, append([]byte(nil), v...)) })
	})
}
