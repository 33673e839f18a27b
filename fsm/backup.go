package fsm

import (
	"bytes"
	"math"

	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/command"
)

// applyRestore puts a backup's links that the shard does not hold, each
// with its clicks (command.RestoreLinks). A restored link's Version is
// this entry's index, not the old cluster's: caches order a link's
// versions by it.
func (f *ShardFSM) applyRestore(tx *bolt.Tx, r *command.RestoreLinks, index uint64) (any, error) {
	res := &command.RestoreResult{}
	var clicks *clickApply
	for i := range r.Links {
		rl := &r.Links[i]
		old, err := getLink(tx, rl.Code)
		if err != nil {
			return nil, err
		}
		if old != nil {
			if rl.Same(old) {
				res.Present++
			} else {
				res.Conflicts = append(res.Conflicts, rl.Code)
			}
			continue
		}
		l, err := rl.Link()
		if err != nil {
			return nil, err // validate passed it: not this entry
		}
		l.Version = index
		if err := f.putLink(tx, nil, l); err != nil {
			return nil, err
		}
		if rl.HasClicks() {
			if clicks == nil {
				clicks = newClickApply(tx)
			}
			if err := f.applyClickDelta(clicks, rl.Delta()); err != nil {
				return nil, err
			}
		}
		res.Restored++
	}
	return res, nil
}

// Dump reads the shard's records after code after (all from ""), in code
// order, tombstones included, each with its clicks, until about budget
// bytes: a backup's part of this shard. more says records follow. One
// read transaction: the part is one point in time.
func (f *ShardFSM) Dump(after string, budget int) (out []command.RestoredLink, more bool, err error) {
	err = f.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketLinks).Cursor()
		k, v := c.Seek([]byte(after))
		if k != nil && string(k) == after {
			k, v = c.Next()
		}
		size := 0
		for ; k != nil; k, v = c.Next() {
			if size >= budget {
				more = true
				return nil
			}
			r := command.RestoredLink{Code: string(k), Record: bytes.Clone(v)}
			if err := readClicks(tx, r.Code, 0, math.MaxUint64, &r.Clicks); err != nil {
				return corrupt("clicks of %q: %w", r.Code, err)
			}
			size += r.Size()
			out = append(out, r)
		}
		return nil
	})
	return out, more, err
}
