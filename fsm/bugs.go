package fsm

import (
	"errors"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The lose-last-apply-on-restart fault of the chaos harness (package
// internal/bugs): while it is on, every link write also keeps the link's
// previous stored value (an empty value: there was none) in a bucket of its
// own, replacing what was kept before; UndoLastWrite puts that value back.
// Nothing here runs unless the fault is switched on in a jepsenbugs build.

var bucketUndo = []byte("jepsen-undo")

// keepUndo remembers code's stored value before this write.
func keepUndo(tx *bolt.Tx, code string) {
	_ = tx.DeleteBucket(bucketUndo)
	b, err := tx.CreateBucket(bucketUndo)
	if err != nil {
		panic(fmt.Sprintf("fsm: jepsen undo bucket: %v", err))
	}
	prev := []byte{}
	if v := tx.Bucket(bucketLinks).Get([]byte(code)); v != nil {
		prev = append([]byte{1}, v...)
	}
	if err := b.Put([]byte(code), prev); err != nil {
		panic(fmt.Sprintf("fsm: jepsen undo record: %v", err))
	}
}

// UndoLastWrite opens the closed shard state file at path and undoes the
// last link write it recorded (see keepUndo), leaving the applied index as
// it is: the replica then lacks an entry that it, and raft, count as
// applied. It returns the code it reverted, or "" if nothing was recorded.
// It exists for the chaos harness's lose-last-apply-on-restart fault only.
func UndoLastWrite(path string) (string, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return "", err
	}
	defer db.Close()
	var code string
	err = db.Update(func(tx *bolt.Tx) error {
		u := tx.Bucket(bucketUndo)
		if u == nil {
			return nil
		}
		k, v := u.Cursor().First()
		if k == nil {
			return nil
		}
		code = string(k)
		links := tx.Bucket(bucketLinks)
		var err error
		if len(v) == 0 {
			err = links.Delete(k)
		} else {
			err = links.Put(k, v[1:])
		}
		if err != nil {
			return err
		}
		return tx.DeleteBucket(bucketUndo)
	})
	return code, err
}
