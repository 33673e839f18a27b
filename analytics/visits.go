package analytics

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/linkraft/linkraft/internal/boltcheck"
	"github.com/linkraft/linkraft/link"
)

// Visits live in one bucket per UTC hour, under a parent bucket: in an
// hour's bucket they are keyed by code, then time, so a code's visits in a
// range are a few seeks, and a write is one put per visit into the current
// hour (the random-order region of the B+tree is one hour, not the whole
// retention). The purge drops whole hours. Each hour bucket's sequence
// counts its visits.
var (
	bucketVisits = []byte("visits-by-hour") // hour(8, BE) -> bucket: code 0x00 time(8) seq(4) -> visit (appendVisit)
	// Files written before hour buckets: migrated when opened.
	bucketByTime = []byte("visits-by-time") // time(8) seq(4) -> visit
	bucketByCode = []byte("visits-by-code") // code 0x00 time(8) seq(4) -> empty
)

// VisitStore keeps this node's raw visits in a local bbolt file. Nothing in
// it is replicated; each node answers for the visits it served.
//
// The file has a budget (VisitLimits): raw visits are a record of what
// anonymous clients did, so a flood must not grow them without end. Past
// the budget, or near the file system's floor, new raw visits are shed
// (counted, never stored); click counts and totals, which go through the
// shards, are not touched. Live bytes are what the file's pages hold
// minus its free pages, so once the purge drops old hours the space they
// held is room again (bbolt reuses free pages; the file does not shrink).
type VisitStore struct {
	db  *bolt.DB
	dir string
	lim VisitLimits
	seq uint32
	// addMu serialises AddBatch (bbolt serialises the writes anyway); it
	// guards scale, the live bytes a visit's raw bytes (visitRaw) took in
	// the last write that grew the file.
	addMu sync.Mutex
	scale float64
	// lump is the most one write has grown the live bytes (under addMu).
	lump int64
	used atomic.Int64  // live bytes after the last commit or purge
	shed atomic.Uint64 // raw visits not stored since open
}

// VisitLimits bound a visit file. A zero field is no bound.
type VisitLimits struct {
	// MaxBytes bounds the file's live bytes (its free pages not counted).
	MaxBytes int64
	// MinFree is the free space of the file system below which no raw
	// visit is written.
	MinFree int64
	// FreeSpace reports the free bytes of the file system holding dir
	// (default: statfs); tests replace it.
	FreeSpace func(dir string) (int64, error)
}

// ErrVisitsShed reports that AddBatch stored only part of a batch (or
// none): the file is at its budget or the disk at its floor.
var ErrVisitsShed = errors.New("analytics: raw visits shed")

// OpenVisitStore opens (or creates) the visit file at path.
func OpenVisitStore(path string, lim VisitLimits) (*VisitStore, error) {
	// Checked first: bbolt would panic past any recover on a damaged page
	// (internal/boltcheck). Raw visits are this node's alone and click
	// counts live in the shards, so the way out is to set the file aside.
	if err := boltcheck.Check(path); err != nil {
		return nil, fmt.Errorf("analytics: %s: %w: stop the node, move the file aside (mv %s %s.damaged) and start it again; "+
			"only this node's raw visits are in it, click counts are in the shards", path, err, path, path)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second, FreelistType: bolt.FreelistMapType, NoFreelistSync: true,
		// Address space, not memory: a file that grows from empty would
		// otherwise be remapped (every node of the open transaction copied
		// out of the old map) at each doubling up to here.
		InitialMmapSize: 256 << 20})
	if err != nil {
		return nil, fmt.Errorf("analytics: open visits: %w", err)
	}
	// Commits are synced. Visits are written once per flush (every 5 s, or
	// when half the buffer fills: about once a second at 50k clicks/s), so
	// that is a commit's two fdatasyncs a second at most. Without them
	// (bbolt's NoSync) a power loss could leave a meta page on disk that
	// points at pages that never got there: a file bbolt cannot open or,
	// worse, panics on when it reads them.
	if lim.FreeSpace == nil {
		lim.FreeSpace = statfsFree
	}
	s := &VisitStore{db: db, dir: filepath.Dir(path), lim: lim}
	err = db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucketVisits)
		return err
	})
	if err == nil {
		err = s.migrate()
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	s.measure()
	return s, nil
}

// statfsFree is the free space of dir's file system for an unprivileged
// writer.
func statfsFree(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// measure records the file's live bytes: its size in pages less its free
// and pending pages.
func (s *VisitStore) measure() {
	var size int64
	_ = s.db.View(func(tx *bolt.Tx) error { size = tx.Size(); return nil })
	s.used.Store(max(size-int64(s.db.Stats().FreeAlloc), 0))
}

// UsedBytes returns the file's live bytes, as of the last write or purge.
func (s *VisitStore) UsedBytes() int64 { return s.used.Load() }

// Limits returns the store's bounds.
func (s *VisitStore) Limits() VisitLimits { return s.lim }

// Shed returns how many raw visits were not stored since open (budget or
// floor).
func (s *VisitStore) Shed() uint64 { return s.shed.Load() }

// room returns how many bytes of visits may be written now (-1 for no
// bound) and what bounds them.
func (s *VisitStore) room() (room int64, why string) {
	room = -1
	if s.lim.MaxBytes > 0 {
		room = max(s.lim.MaxBytes-s.used.Load(), 0)
		why = fmt.Sprintf("%d live bytes, budget %d (-visits-max-bytes)", s.used.Load(), s.lim.MaxBytes)
	}
	if s.lim.MinFree > 0 {
		if free, err := s.lim.FreeSpace(s.dir); err == nil {
			if r := max(free-s.lim.MinFree, 0); room < 0 || r < room {
				room = r
				why = fmt.Sprintf("%d bytes free on the file system, raw visits stop at %d (twice -min-free-bytes)", free, s.lim.MinFree)
			}
		}
	}
	return room, why
}

// visitRaw is a visit record's raw cost: its value, its key (about as
// long as the code in the value, plus 13 bytes) and bbolt's element
// header. What it takes in the file is that times the store's scale
// (pages are filled about half by inserts out of key order), learnt from
// each write.
func visitRaw(rec []byte) int64 { return int64(len(rec) + 16 + 16) }

// initialScale is the scale before any write has been measured.
const initialScale = 3

// migrate moves visits from the layout before hour buckets, 10,000 per
// transaction.
func (s *VisitStore) migrate() error {
	for {
		done := false
		err := s.db.Update(func(tx *bolt.Tx) error {
			tb := tx.Bucket(bucketByTime)
			if tb == nil {
				done = true
				return nil
			}
			var vs VisitBatch
			var keys [][]byte
			c := tb.Cursor()
			for k, v := c.First(); k != nil && vs.Len() < 10000; k, v = c.Next() {
				vis, err := decodeVisit(v)
				if err != nil {
					return err
				}
				vs.Append(&vis)
				keys = append(keys, bytes.Clone(k))
			}
			for _, k := range keys { // deleting under the cursor would skip keys
				if err := tb.Delete(k); err != nil {
					return err
				}
			}
			if vs.Len() == 0 {
				done = true
				for _, b := range [][]byte{bucketByTime, bucketByCode} {
					if err := tx.DeleteBucket(b); err != nil && !errors.Is(err, bolterrors.ErrBucketNotFound) {
						return err
					}
				}
				return nil
			}
			return s.put(tx, &vs, 0, vs.Len())
		})
		if err != nil || done {
			return err
		}
	}
}

// The orphans bucket holds this node's counts of requests for unknown
// codes: code -> count (8 bytes, big-endian), and the total under
// orphanTotalKey (no code has a 0x00 byte).
var (
	bucketOrphans  = []byte("orphans")
	orphanTotalKey = []byte{0}
)

// AddOrphans adds counts (code -> requests) and total to the stored orphan
// counts, in one transaction.
func (s *VisitStore) AddOrphans(counts map[string]uint64, total uint64) error {
	if total == 0 && len(counts) == 0 {
		return nil
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketOrphans)
		if err != nil {
			return err
		}
		add := func(k []byte, n uint64) error {
			var cur uint64
			if v := b.Get(k); len(v) == 8 {
				cur = binary.BigEndian.Uint64(v)
			}
			return b.Put(k, binary.BigEndian.AppendUint64(nil, cur+n))
		}
		for c, n := range counts {
			if err := add([]byte(c), n); err != nil {
				return err
			}
		}
		return add(orphanTotalKey, total)
	})
}

// Orphans returns the stored orphan counts and their total.
func (s *VisitStore) Orphans() (map[string]uint64, uint64, error) {
	counts := map[string]uint64{}
	var total uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketOrphans)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if len(v) != 8 {
				return fmt.Errorf("analytics: orphan count of %q is %d bytes", k, len(v))
			}
			if bytes.Equal(k, orphanTotalKey) {
				total = binary.BigEndian.Uint64(v)
			} else {
				counts[string(k)] = binary.BigEndian.Uint64(v)
			}
			return nil
		})
	})
	return counts, total, err
}

// Close closes the file.
func (s *VisitStore) Close() error { return s.db.Close() }

// Add stores visits in one transaction.
func (s *VisitStore) Add(visits []link.Visit) error {
	var b VisitBatch
	for i := range visits {
		b.Append(&visits[i])
	}
	_, err := s.AddBatch(&b)
	return err
}

// AddBatch stores a batch of visits in one transaction: as many as the
// budget has room for, in batch order. When some are shed it says so
// with ErrVisitsShed (and how many); they are counted in Shed.
func (s *VisitStore) AddBatch(b *VisitBatch) (shed int, err error) {
	if b.Len() == 0 {
		return 0, nil
	}
	s.addMu.Lock()
	defer s.addMu.Unlock()
	if s.scale == 0 {
		s.scale = initialScale
	}
	// Near the budget a batch goes in a few rounds, each taking at most
	// half the room left by its estimate: an estimate off by half still
	// cannot pass the budget, and the scale is learnt from each round.
	next, why := 0, ""
	for round := 0; next < b.Len() && round < 4 && err == nil; round++ {
		var room int64
		room, why = s.room()
		if room >= 0 {
			// bbolt grows the file in lumps (a node it rewrites needs a
			// contiguous run of pages the freelist may not have): no write
			// starts without the largest lump seen so far (at most a
			// quarter of the budget) to spare.
			lump := s.lump
			if s.lim.MaxBytes > 0 {
				lump = min(lump, s.lim.MaxBytes/4)
			}
			room = max(room-lump, 0)
		}
		from, raw := next, int64(0)
		start := 0
		if from > 0 {
			start = b.ends[from-1]
		}
		for _, end := range b.ends[from:] {
			r := visitRaw(b.buf[start:end])
			if room >= 0 && float64(raw+r)*s.scale > float64(room)/2 {
				break
			}
			raw += r
			start = end
			next++
		}
		if next == from {
			break
		}
		before := s.used.Load()
		err = s.db.Update(func(tx *bolt.Tx) error { return s.put(tx, b, from, next) })
		s.measure()
		if grew := s.used.Load() - before; err == nil && grew > s.lump {
			s.lump = grew
		}
		if grew := s.used.Load() - before; err == nil && grew > 0 && raw >= 64<<10 {
			// Learn from a write big enough to measure (pages are 4 KiB);
			// a write into free pages left by a purge grows nothing.
			s.scale = min(max(float64(grew)/float64(raw), 1), 8)
		}
	}
	shed = b.Len() - next
	if shed > 0 {
		s.shed.Add(uint64(shed))
		if err == nil {
			err = fmt.Errorf("%w: %d of %d not stored: %s", ErrVisitsShed, shed, b.Len(), why)
		}
	}
	return shed, err
}

// put writes a batch in key order: a bbolt node takes a put by moving the
// keys after it, so keys in order cost a constant each where keys in
// arrival order cost a move of the node. The values are the batch's own
// bytes (bbolt holds them until the commit, which comes before the batch
// is reused).
func (s *VisitStore) put(tx *bolt.Tx, b *VisitBatch, from, to int) error {
	type entry struct {
		hour int64
		pre  uint64 // the code's first 8 bytes, zero-padded: most codes sort on it alone
		t    int64
		seq  uint32
		rec  []byte
		code []byte
	}
	es := make([]entry, to-from)
	size, start := 0, 0
	if from > 0 {
		start = b.ends[from-1]
	}
	start0 := start
	for i, end := range b.ends[from:to] {
		rec := b.buf[start:end:end]
		start = end
		if len(rec) < 10 || rec[0] != visitFormat {
			return errBadVisit
		}
		n, k := binary.Uvarint(rec[10:])
		if k <= 0 || uint64(len(rec)-10-k) < n {
			return errBadVisit
		}
		s.seq++
		code := rec[10+k : 10+k+int(n)]
		var pre [8]byte
		copy(pre[:], code)
		t := max(int64(binary.BigEndian.Uint64(rec[1:9])), 0)
		es[i] = entry{hourOf(t), binary.BigEndian.Uint64(pre[:]), t, s.seq, rec, code}
		size += int(n) + 13
	}
	slices.SortFunc(es, func(a, b entry) int {
		if c := cmp.Compare(a.hour, b.hour); c != 0 {
			return c
		}
		if c := cmp.Compare(a.pre, b.pre); c != 0 {
			return c
		}
		if len(a.code) > 8 || len(b.code) > 8 {
			if c := bytes.Compare(a.code, b.code); c != 0 {
				return c
			}
		}
		return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.seq, b.seq))
	})
	keys := make([]byte, 0, size) // one allocation for every key
	// and one for every value: the records, each behind its length, and
	// a format byte per group (at most one group per visit)
	vals := make([]byte, 0, b.ends[to-1]-start0+len(es)*(binary.MaxVarintLen32+1))
	parent := tx.Bucket(bucketVisits)
	var hb, bk *bolt.Bucket
	hour := int64(-1)
	groups := 0
	for i := 0; i < len(es); {
		e := es[i]
		if h := e.hour; h != hour || bk == nil {
			// This write's segment of the hour: a bucket of its own, filled
			// in key order, keyed by the write's newest visit.
			end := i
			for end < len(es) && es[end].hour == h {
				end++
			}
			newest := int64(0)
			for _, x := range es[i:end] {
				newest = max(newest, x.t)
			}
			var err error
			if hb, err = parent.CreateBucketIfNotExists(hourKey(h)); err != nil {
				return err
			}
			segs, err := hb.CreateBucketIfNotExists(segmentsKey)
			if err != nil {
				return err
			}
			if bk, err = segs.CreateBucketIfNotExists(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, uint64(newest)), es[end-1].seq)); err != nil {
				return err
			}
			bk.FillPercent = 1 // keys arrive in order: full pages
			hour = h
		}
		// The group: this code's visits of this hour in the batch, up to
		// maxGroupVisits of them within maxGroupSpan of the first.
		j := i + 1
		for j < len(es) && j-i < maxGroupVisits && es[j].hour == e.hour && bytes.Equal(es[j].code, e.code) && es[j].t-e.t <= int64(maxGroupSpan) {
			j++
		}
		last := es[j-1]
		from := len(keys)
		keys = append(keys, e.code...)
		keys = append(keys, 0)
		keys = binary.BigEndian.AppendUint64(keys, uint64(last.t))
		keys = binary.BigEndian.AppendUint32(keys, last.seq)
		// bbolt keeps the value until the commit: vals is never reused.
		at := len(vals)
		vals = append(vals, visitGroupFormat)
		for _, g := range es[i:j] {
			vals = binary.AppendUvarint(vals, uint64(len(g.rec)))
			vals = append(vals, g.rec...)
		}
		if err := bk.Put(keys[from:len(keys):len(keys)], vals[at:len(vals):len(vals)]); err != nil {
			return err
		}
		if err := hb.SetSequence(hb.Sequence() + uint64(j-i)); err != nil {
			return err
		}
		if groups++; groups%256 == 0 {
			runtime.Gosched() // redirects waiting for a core go first now and then
		}
		i = j
	}
	return nil
}

const (
	visitGroupFormat = 2
	maxGroupVisits   = 256
	maxGroupSpan     = time.Minute
)

// List returns up to limit visits of code in [from, to), newest first.
func (s *VisitStore) List(code string, from, to time.Time, limit int) ([]link.Visit, error) {
	out := []link.Visit{}
	lo, hi := max(from.UnixNano(), 0), max(to.UnixNano(), 0)
	if hi <= lo || limit <= 0 {
		return out, nil
	}
	// A record's key carries its last visit's time; its first is at most
	// maxGroupSpan before. Records are read newest key first; visits in
	// range are kept (trimmed to limit whenever limit are held), and the reading stops
	// once no older record can hold a visit newer than the limit-th kept.
	prefix := append([]byte(code), 0)
	seekTo := visitKey(code, min(hi, math.MaxInt64-int64(maxGroupSpan))+int64(maxGroupSpan), 0)
	trim := func() {
		slices.SortStableFunc(out, func(a, b link.Visit) int { return b.Time.Compare(a.Time) })
		if len(out) > limit {
			clear(out[limit:])
			out = out[:limit]
		}
	}
	sorted := true
	full := func(t int64) bool { // out holds limit visits no older than t
		if len(out) < limit {
			return false
		}
		if !sorted {
			trim()
			sorted = true
		}
		return out[limit-1].Time.UnixNano() >= t
	}
	// scan reads code's records in b, newest key first.
	var recs [][]byte
	scan := func(b *bolt.Bucket) error {
		c := b.Cursor()
		vk, v := c.Seek(seekTo)
		if vk == nil {
			vk, v = c.Last()
		} else {
			vk, v = c.Prev()
		}
		for ; vk != nil && bytes.HasPrefix(vk, prefix) && len(vk) == len(prefix)+12; vk, v = c.Prev() {
			if v == nil {
				continue // a bucket
			}
			last := int64(binary.BigEndian.Uint64(vk[len(prefix):]))
			if last < lo || full(last+1) {
				break
			}
			recs = recs[:0]
			if err := eachVisit(v, func(rec []byte) error { recs = append(recs, rec); return nil }); err != nil {
				return err
			}
			for i := len(recs) - 1; i >= 0; i-- { // newest first, as the keys go
				vis, err := decodeVisit(recs[i])
				if err != nil {
					return err
				}
				if t := vis.Time.UnixNano(); t >= lo && t < hi {
					out, sorted = append(out, vis), false
				}
			}
		}
		return nil
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		parent := tx.Bucket(bucketVisits)
		pc := parent.Cursor()
		k, _ := pc.Seek(hourKey(hourOf(hi - 1)))
		if k == nil {
			k, _ = pc.Last()
		} else if int64(binary.BigEndian.Uint64(k)) > hourOf(hi-1) {
			k, _ = pc.Prev()
		}
		for ; k != nil && int64(binary.BigEndian.Uint64(k)) >= hourOf(lo); k, _ = pc.Prev() {
			if full((int64(binary.BigEndian.Uint64(k)) + 1) * int64(time.Hour)) {
				break
			}
			hb := parent.Bucket(k)
			if hb == nil {
				continue
			}
			// Records of the layout before segments, in the hour's own
			// bucket (their newest time unknown: read first, in full).
			if err := scan(hb); err != nil {
				return err
			}
			segs := hb.Bucket(segmentsKey)
			if segs == nil {
				continue
			}
			sc := segs.Cursor()
			for sk, _ := sc.Last(); sk != nil; sk, _ = sc.Prev() {
				if len(sk) != 12 {
					continue
				}
				newest := int64(binary.BigEndian.Uint64(sk))
				if newest < lo {
					break // segments are in newest-visit order
				}
				if full(newest + 1) {
					break
				}
				if seg := segs.Bucket(sk); seg != nil {
					if err := scan(seg); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
	trim()
	return out, err
}

// Purge deletes the visits of the hours that ended by before (so a visit
// outlives the retention by less than an hour), one hour per
// transaction, and returns how many went.
func (s *VisitStore) Purge(before time.Time) (int, error) {
	cut := hourOf(max(before.UnixNano(), 0))
	total := 0
	for {
		n, done := 0, false
		err := s.db.Update(func(tx *bolt.Tx) error {
			parent := tx.Bucket(bucketVisits)
			k, _ := parent.Cursor().First()
			if k == nil || int64(binary.BigEndian.Uint64(k)) >= cut {
				done = true
				return nil
			}
			if b := parent.Bucket(k); b != nil {
				n = int(b.Sequence())
			}
			return parent.DeleteBucket(k)
		})
		total += n
		if err != nil || done {
			s.measure()
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
