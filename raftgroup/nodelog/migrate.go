package nodelog

import (
	"errors"
	"fmt"
	"maps"
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
// log, replacing whatever the log held for name, then removes path. It is
// a no-op when path does not exist. The group must not be running.
//
// path is removed only after the copy is durable. A crash before that
// leaves both, the copy perhaps part done; path is then the whole one (it
// is written whole before it is renamed in, and removed only after its
// copy is complete), and the next Import does the work again.
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
	err = s.importFrom(name, src)
	if cerr := src.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("import %s into %s: %w", path, s.dir, err)
	}
	if err := os.Remove(path); err != nil {
		return err
	}
	return atomicfile.SyncDir(filepath.Dir(path))
}

// importFrom replaces group name's part of the log with src's entries and
// stable keys.
func (s *Store) importFrom(name string, src *raftboltdb.BoltStore) error {
	if err := s.Drop(name); err != nil {
		return err
	}
	l := s.Log(name)
	first, err := src.FirstIndex()
	if err != nil {
		return err
	}
	last, err := src.LastIndex()
	if err != nil {
		return err
	}
	var chunk []*raft.Log
	flush := func() error {
		err := l.StoreLogs(chunk)
		chunk = chunk[:0]
		return err
	}
	for i := first; i <= last && i > 0; i++ {
		e := &raft.Log{}
		if err := src.GetLog(i, e); errors.Is(err, raft.ErrLogNotFound) {
			// A gap (a snapshot installed by a version whose log kept
			// one): what is before it is covered by the snapshot, and the
			// entries after it replace it.
			if err := flush(); err != nil {
				return err
			}
			continue
		} else if err != nil {
			return err
		}
		if len(chunk) > 0 && chunk[len(chunk)-1].Index+1 != i {
			if err := flush(); err != nil {
				return err
			}
		}
		if chunk = append(chunk, e); len(chunk) == exportChunk {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	for _, k := range stableKeys {
		v, err := src.Get(k)
		if errors.Is(err, raftboltdb.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if err := l.Set(k, v); err != nil {
			return err
		}
	}
	return nil
}

// Export writes group name's log and stable store to a raft-boltdb file
// at path (for a version that keeps one file per group), then drops them
// from this log. It is a no-op when the log holds nothing for name. The
// group must not be running.
//
// The file is written beside path and renamed over it once synced; name is
// dropped only after that, so a crash leaves either the old state or both
// copies, the same, and the file at path is then the one to keep.
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
		return fmt.Errorf("export group %s of %s to %s: %w", name, s.dir, path, err)
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
	first, err := l.FirstIndex()
	if err != nil {
		return err
	}
	last, err := l.LastIndex()
	if err != nil {
		return err
	}
	for i := first; i <= last && i > 0; {
		var chunk []*raft.Log
		for ; i <= last && len(chunk) < exportChunk; i++ {
			e := &raft.Log{}
			if err := l.GetLog(i, e); err != nil {
				return err
			}
			chunk = append(chunk, e)
		}
		if err := dst.StoreLogs(chunk); err != nil {
			return err
		}
	}
	var stable map[string][]byte
	if err := l.read(func(g *group) error {
		if g != nil {
			stable = maps.Clone(g.stable)
		}
		return nil
	}); err != nil {
		return err
	}
	for k, v := range stable {
		if err := dst.Set([]byte(k), v); err != nil {
			return err
		}
	}
	return nil
}
