package analytics

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/link"
)

// Visits are appended in time order to one bucket (sequential keys: cheap
// inserts, and the purge walks it from the front); a second bucket indexes
// them by code with empty values, so the random-order part of every write
// is small.
var (
	bucketByTime = []byte("visits-by-time") // time(8) seq(4) -> visit (appendVisit)
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
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second, FreelistType: bolt.FreelistMapType, NoFreelistSync: true,
		// Address space, not memory: a file that grows from empty would
		// otherwise be remapped (every node of the open transaction copied
		// out of the old map) at each doubling up to here.
		InitialMmapSize: 256 << 20})
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

func appendTimeKey(b []byte, t int64, seq uint32) []byte {
	return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(b, uint64(t)), seq)
}

func appendVisitKey(b []byte, code string, t int64, seq uint32) []byte {
	b = append(b, code...)
	b = append(b, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(t))
	return binary.BigEndian.AppendUint32(b, seq)
}

func visitKey(code string, t int64, seq uint32) []byte {
	return appendVisitKey(make([]byte, 0, len(code)+13), code, t, seq)
}

// Add stores visits in one transaction. Both buckets are written in key
// order: a bbolt node takes a put by moving the keys after it, so keys in
// order cost a constant each where keys in arrival order (random in the
// by-code index) cost a move of the node.
func (s *VisitStore) Add(visits []link.Visit) error {
	if len(visits) == 0 {
		return nil
	}
	type entry struct {
		v   *link.Visit
		t   int64
		seq uint32
	}
	es := make([]entry, len(visits))
	size := 0
	for i := range visits {
		s.seq++
		es[i] = entry{&visits[i], max(visits[i].Time.UnixNano(), 0), s.seq}
		size += 12 + len(visits[i].Code) + 13 + encodedVisitSize(&visits[i])
	}
	// One allocation for every key and value (bbolt holds them until the
	// commit).
	arena := make([]byte, 0, size)
	carve := func(fill func([]byte) []byte) []byte {
		start := len(arena)
		arena = fill(arena)
		return arena[start:len(arena):len(arena)]
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		tb, cb := tx.Bucket(bucketByTime), tx.Bucket(bucketByCode)
		tb.FillPercent = 0.95 // appends: pack the pages
		slices.SortFunc(es, func(a, b entry) int { return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.seq, b.seq)) })
		for _, e := range es {
			k := carve(func(b []byte) []byte { return appendTimeKey(b, e.t, e.seq) })
			v := carve(func(b []byte) []byte { return appendVisit(b, e.v) })
			if err := tb.Put(k, v); err != nil {
				return err
			}
		}
		slices.SortFunc(es, func(a, b entry) int {
			return cmp.Or(strings.Compare(a.v.Code, b.v.Code), cmp.Compare(a.t, b.t), cmp.Compare(a.seq, b.seq))
		})
		for _, e := range es {
			k := carve(func(b []byte) []byte { return appendVisitKey(b, e.v.Code, e.t, e.seq) })
			if err := cb.Put(k, nil); err != nil {
				return err
			}
		}
		return nil
	})
}

// A visit is stored as version byte 1, the time (Unix ns, 8 bytes BE), the
// bot flag and six length-prefixed strings. Files written before that hold
// JSON (first byte '{'); they are still read.
const visitFormat = 1

func encodedVisitSize(v *link.Visit) int {
	n := 10
	for _, s := range [...]string{v.Code, v.Node, v.Network, v.Country, v.UserAgent, v.Referer} {
		n += binary.MaxVarintLen16 + len(s)
	}
	return n
}

func appendVisit(b []byte, v *link.Visit) []byte {
	b = append(b, visitFormat)
	b = binary.BigEndian.AppendUint64(b, uint64(v.Time.UnixNano()))
	bot := byte(0)
	if v.Bot {
		bot = 1
	}
	b = append(b, bot)
	for _, s := range [...]string{v.Code, v.Node, v.Network, v.Country, v.UserAgent, v.Referer} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

var errBadVisit = errors.New("analytics: malformed visit record")

func decodeVisit(b []byte) (link.Visit, error) {
	var v link.Visit
	if len(b) > 0 && b[0] == '{' {
		err := json.Unmarshal(b, &v)
		return v, err
	}
	if len(b) < 10 || b[0] != visitFormat {
		return v, errBadVisit
	}
	v.Time = time.Unix(0, int64(binary.BigEndian.Uint64(b[1:9]))).UTC()
	v.Bot = b[9] == 1
	b = b[10:]
	for _, dst := range [...]*string{&v.Code, &v.Node, &v.Network, &v.Country, &v.UserAgent, &v.Referer} {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return v, errBadVisit
		}
		*dst = string(b[k : k+int(n)])
		b = b[k+int(n):]
	}
	return v, nil
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
			vis, err := decodeVisit(v)
			if err != nil {
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
				vis, err := decodeVisit(v)
				if err != nil {
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
