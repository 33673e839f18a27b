package analytics

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/link"
)

// Visits are appended in time order to one bucket (sequential keys: cheap
// inserts, and the purge walks it from the front); a second bucket indexes
// them by code with empty values, so the random-order part of every write
// is small.
var (
	bucketByTime = []byte("visits-by-time") // time(8) seq(4) -> JSON visit
	bucketByCode = []byte("visits-by-code") // code 0x00 time(8) seq(4) -> empty
)

// VisitStore keeps this node's raw visits in a local bbolt file. Nothing in
// it is replicated; each node answers for the visits it served.
type VisitStore struct {
	db  *bolt.DB
	seq uint32
}

// OpenVisitStore opens (or creates) the visit file at path.
func OpenVisitStore(path string) (*VisitStore, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second, FreelistType: bolt.FreelistMapType, NoFreelistSync: true})
	if err != nil {
		return nil, fmt.Errorf("analytics: open visits: %w", err)
	}
	// Raw visits are a local, best-effort record: a crash of the process
	// loses nothing (the page cache survives it); a power loss may lose the
	// last writes. No fsync per flush.
	db.NoSync = true
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketByCode, bucketByTime} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &VisitStore{db: db}, nil
}

// Close closes the file.
func (s *VisitStore) Close() error { return s.db.Close() }

func timeKey(t int64, seq uint32) []byte {
	return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(make([]byte, 0, 12), uint64(t)), seq)
}

func visitKey(code string, t int64, seq uint32) []byte {
	k := make([]byte, 0, len(code)+13)
	k = append(k, code...)
	k = append(k, 0)
	k = binary.BigEndian.AppendUint64(k, uint64(t))
	return binary.BigEndian.AppendUint32(k, seq)
}

// Add stores visits in one transaction.
func (s *VisitStore) Add(visits []link.Visit) error {
	if len(visits) == 0 {
		return nil
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		tb, cb := tx.Bucket(bucketByTime), tx.Bucket(bucketByCode)
		tb.FillPercent = 0.95 // appends: pack the pages
		for i := range visits {
			v := &visits[i]
			s.seq++
			t := max(v.Time.UnixNano(), 0)
			val, err := json.Marshal(v)
			if err != nil {
				return err
			}
			if err := tb.Put(timeKey(t, s.seq), val); err != nil {
				return err
			}
			if err := cb.Put(visitKey(v.Code, t, s.seq), nil); err != nil {
				return err
			}
		}
		return nil
	})
}

// List returns up to limit visits of code in [from, to), newest first.
func (s *VisitStore) List(code string, from, to time.Time, limit int) ([]link.Visit, error) {
	out := []link.Visit{}
	err := s.db.View(func(tx *bolt.Tx) error {
		tb := tx.Bucket(bucketByTime)
		c := tx.Bucket(bucketByCode).Cursor()
		lo := visitKey(code, max(from.UnixNano(), 0), 0)
		hi := visitKey(code, max(to.UnixNano(), 0), 0)
		k, _ := c.Seek(hi)
		if k == nil {
			k, _ = c.Last()
		}
		for ; k != nil && len(out) < limit; k, _ = c.Prev() {
			if string(k) >= string(hi) {
				continue
			}
			if string(k) < string(lo) {
				break
			}
			v := tb.Get(k[len(k)-12:])
			if v == nil {
				continue // purged meanwhile
			}
			var vis link.Visit
			if err := json.Unmarshal(v, &vis); err != nil {
				return err
			}
			out = append(out, vis)
		}
		return nil
	})
	return out, err
}

// Purge deletes the visits older than before, in transactions of at most
// 10,000, and returns how many went.
func (s *VisitStore) Purge(before time.Time) (int, error) {
	cut := binary.BigEndian.AppendUint64(nil, uint64(max(before.UnixNano(), 0)))
	total := 0
	for {
		n := 0
		err := s.db.Update(func(tx *bolt.Tx) error {
			tb, cb := tx.Bucket(bucketByTime), tx.Bucket(bucketByCode)
			c := tb.Cursor()
			for k, v := c.First(); k != nil && string(k[:8]) < string(cut) && n < 10000; k, v = c.First() {
				if len(k) != 12 {
					return fmt.Errorf("analytics: malformed visit key")
				}
				var vis struct {
					Code string `json:"code"`
				}
				if err := json.Unmarshal(v, &vis); err != nil {
					return err
				}
				ik := append(append([]byte(vis.Code), 0), k...)
				if err := cb.Delete(ik); err != nil {
					return err
				}
				if err := c.Delete(); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		total += n
		if err != nil || n < 10000 {
			return total, err
		}
	}
}

// RunPurge deletes visits older than retention every interval until ctx
// ends.
func (s *VisitStore) RunPurge(ctx context.Context, retention, every time.Duration, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if n, err := s.Purge(time.Now().Add(-retention)); err != nil {
			log.Warn("visit purge failed", "err", err)
		} else if n > 0 {
			log.Info("purged old visits", "count", n, "retention", retention)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
