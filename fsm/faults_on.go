//go:build jepsenbugs

package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/internal/bugs"
)

// The fsm's deliberate faults of the chaos harness (package internal/bugs),
// compiled only into jepsenbugs builds (faults_off.go is the normal build's
// no-op twin). tombstone-reuse lets a create take a deleted code. With
// lose-last-apply-on-restart on, every link write also keeps the link's
// previous stored value in a bucket of its own (the last undoDepth writes);
// UndoLastWrites puts such values back. Nothing here runs unless the fault
// is switched on in a jepsenbugs build.

var bucketUndo = []byte("jepsen-undo")

// faultBeforePut runs before a link write: it keeps the undo record of
// code.
func faultBeforePut(tx *bolt.Tx, code string) error {
	if !bugs.On(bugs.LoseLastApply) {
		return nil
	}
	return keepUndo(tx, code)
}

// faultReuseTombstone says whether a create may take a deleted code.
func faultReuseTombstone() bool { return bugs.On(bugs.TombstoneReuse) }

// undoDepth is how many writes keepUndo remembers.
const undoDepth = 2

// keepUndo remembers code's stored value before this write: a record keyed
// by a sequence number, holding the code, a 0 byte, and the old value (with
// a leading 1; nothing if there was none).
func keepUndo(tx *bolt.Tx, code string) error {
	b, err := tx.CreateBucketIfNotExists(bucketUndo)
	if err != nil {
		return fmt.Errorf("jepsen undo bucket: %w", err)
	}
	var seq uint64
	if k, _ := b.Cursor().Last(); len(k) == 8 {
		seq = binary.BigEndian.Uint64(k) + 1
	}
	rec := append([]byte(code), 0)
	if v := tx.Bucket(bucketLinks).Get([]byte(code)); v != nil {
		rec = append(append(rec, 1), v...)
	}
	if err := b.Put(binary.BigEndian.AppendUint64(nil, seq), rec); err != nil {
		return fmt.Errorf("jepsen undo record: %w", err)
	}
	if seq >= undoDepth {
		return b.Delete(binary.BigEndian.AppendUint64(nil, seq-undoDepth))
	}
	return nil
}

// UndoLastWrites opens the closed shard state file at path and undoes the
// last n link writes it recorded (see keepUndo; n is at most 2), newest
// first, leaving the applied index as it is: the replica then lacks entries
// that it, and raft, count as applied. It returns the codes it reverted. It
// exists for the chaos harness's lose-last-apply-on-restart fault only.
func UndoLastWrites(path string, n int) ([]string, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var codes []string
	err = db.Update(func(tx *bolt.Tx) error {
		u := tx.Bucket(bucketUndo)
		if u == nil {
			return nil
		}
		links := tx.Bucket(bucketLinks)
		c := u.Cursor()
		for k, v := c.Last(); k != nil && len(codes) < n; k, v = c.Prev() {
			code, old, ok := bytes.Cut(v, []byte{0})
			if !ok {
				return fmt.Errorf("malformed undo record %x", k)
			}
			if len(old) == 0 {
				err = links.Delete(code)
			} else {
				err = links.Put(code, old[1:])
			}
			if err != nil {
				return err
			}
			codes = append(codes, string(code))
		}
		// The lost applies' index entries go with them: the indexes are
		// dropped and rebuilt from the links when the file is next opened.
		for _, b := range indexBuckets {
			if tx.Bucket(b) != nil {
				if err := tx.DeleteBucket(b); err != nil {
					return err
				}
			}
		}
		if err := tx.Bucket(bucketMeta).Delete(keyIndexed); err != nil {
			return err
		}
		return tx.DeleteBucket(bucketUndo)
	})
	return codes, err
}
