package fsm

import (
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/command"
)

// Idempotency-Key claims (command.ClaimKey), kept in the shard their key's
// identity hashes to.
var (
	bucketClaims      = []byte("claims")           // key identity -> command.Claim
	bucketClaimExpiry = []byte("claims-by-expiry") // expires(8, BE unix nanos) key identity -> empty
)

// claimPrunes bounds the expired claims one ClaimKey removes: a claim made
// removes up to this many that expired, so the table holds about a day of
// claims without a sweep of its own, and no apply does unbounded work.
const claimPrunes = 8

func claimExpiryKey(expires time.Time, key string) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(key)), uint64(expires.UnixNano()))
	return append(b, key...)
}

func (f *ShardFSM) applyClaim(tx *bolt.Tx, c *command.ClaimKey) (any, error) {
	claims, byExpiry := tx.Bucket(bucketClaims), tx.Bucket(bucketClaimExpiry)
	if err := pruneClaims(claims, byExpiry, c.Now); err != nil {
		return nil, fmt.Errorf("prune claims: %w", err)
	}
	if v := claims.Get([]byte(c.Key)); v != nil {
		var old command.Claim
		if err := old.Unmarshal(v); err != nil {
			return nil, corrupt("claim %s: %w", c.Key, err)
		}
		if old.Expires.After(c.Now) {
			return &command.ClaimResult{Claim: old, Existing: true}, nil
		}
		if err := byExpiry.Delete(claimExpiryKey(old.Expires, c.Key)); err != nil {
			return nil, fmt.Errorf("claim %s: %w", c.Key, err)
		}
	}
	rec := command.Claim{Body: c.Body, Codes: c.Codes, Expires: c.Now.Add(command.ClaimTTL), Attempt: c.Attempt}
	if err := claims.Put([]byte(c.Key), rec.AppendTo(nil)); err != nil {
		return nil, fmt.Errorf("claim %s: %w", c.Key, err)
	}
	if err := byExpiry.Put(claimExpiryKey(rec.Expires, c.Key), nil); err != nil {
		return nil, fmt.Errorf("claim %s: %w", c.Key, err)
	}
	return &command.ClaimResult{Claim: rec}, nil
}

// pruneClaims removes up to claimPrunes claims that expired by now, oldest
// first.
func pruneClaims(claims, byExpiry *bolt.Bucket, now time.Time) error {
	c := byExpiry.Cursor()
	var done [][]byte
	for k, _ := c.First(); k != nil && len(done) < claimPrunes; k, _ = c.Next() {
		if len(k) < 8 || int64(binary.BigEndian.Uint64(k)) > now.UnixNano() {
			break
		}
		done = append(done, k)
	}
	for _, k := range done {
		if err := claims.Delete(k[8:]); err != nil {
			return err
		}
		if err := byExpiry.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// Claims returns the number of claims the shard holds (expired ones not yet
// pruned included).
func (f *ShardFSM) Claims() (int, error) {
	n := 0
	err := f.view(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucketClaims).Stats().KeyN
		return nil
	})
	return n, err
}
