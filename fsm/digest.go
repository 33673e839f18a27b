package fsm

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"

	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/command"
)

// Digest sums up a replica's state as of one applied index, read in one
// transaction. Replicas of a group that have applied the same index must
// have the same digest; the chaos harness compares them (etcd's robustness
// tests end the same way, with a hash of every member's keys).
type Digest struct {
	// AppliedIndex is the last Raft index the state includes.
	AppliedIndex uint64
	// Items counts what was summed: links (tombstones included) for a
	// shard, lease grants for the meta group.
	Items int
	// Sum is the hex SHA-256 of the items, in key order.
	Sum string
}

// digest reads the applied index and sums what sum writes to h, in one
// read transaction.
func (s *store) digest(sum func(tx *bolt.Tx, h hash.Hash) (int, error)) (Digest, error) {
	var d Digest
	err := s.view(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(keyApplied); len(v) == 8 {
			d.AppliedIndex = binary.BigEndian.Uint64(v)
		}
		h := sha256.New()
		n, err := sum(tx, h)
		if err != nil {
			return fmt.Errorf("digest %s: %w", s.path, err)
		}
		d.Items, d.Sum = n, hex.EncodeToString(h.Sum(nil))
		return nil
	})
	return d, err
}

// Digest sums every stored link, tombstones included: its code, URL,
// version (the Raft index of its last change), tombstone and disabled
// flags, redirect status, expiry and visit count.
func (f *ShardFSM) Digest() (Digest, error) {
	return f.digest(func(tx *bolt.Tx, h hash.Hash) (int, error) {
		n := 0
		err := tx.Bucket(bucketLinks).ForEach(func(k, v []byte) error {
			l, err := command.DecodeRecord(k, v)
			if err != nil {
				return fmt.Errorf("stored link %q: %w", k, err)
			}
			var b []byte
			b = binary.AppendUvarint(b, uint64(len(l.Code)))
			b = append(b, l.Code...)
			b = binary.AppendUvarint(b, uint64(len(l.URL)))
			b = append(b, l.URL...)
			b = binary.BigEndian.AppendUint64(b, l.Version)
			b = append(b, flag(l.Deleted), flag(l.Disabled))
			b = binary.BigEndian.AppendUint16(b, uint16(l.Redirect))
			var exp int64 // never expires
			if !l.ExpiresAt.IsZero() {
				exp = l.ExpiresAt.UnixNano()
			}
			b = binary.BigEndian.AppendUint64(b, uint64(exp))
			b = binary.BigEndian.AppendUint64(b, l.Visits)
			h.Write(b)
			n++
			return nil
		})
		return n, err
	})
}

// Digest sums the meta replica's settings, placement, next free ID and
// every lease grant.
func (f *MetaFSM) Digest() (Digest, error) {
	return f.digest(func(tx *bolt.Tx, h hash.Hash) (int, error) {
		for _, k := range [][]byte{keyCluster, keyPlacement} {
			v := tx.Bucket(bucketSettings).Get(k)
			h.Write(binary.AppendUvarint(nil, uint64(len(v))))
			h.Write(v)
		}
		h.Write(tx.Bucket(bucketIDs).Get(keyNextID))
		n := 0
		err := forEachLease(tx, func(l Lease) error {
			b := binary.BigEndian.AppendUint64(nil, l.Index)
			b = binary.BigEndian.AppendUint64(b, l.Start)
			b = binary.BigEndian.AppendUint64(b, l.End)
			b = binary.AppendUvarint(b, uint64(len(l.Node)))
			h.Write(append(b, l.Node...))
			n++
			return nil
		})
		return n, err
	})
}

func flag(b bool) byte {
	if b {
		return 1
	}
	return 0
}
