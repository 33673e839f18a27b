// Package nodelog is a node's Raft log: one append-only log, in segment
// files of one directory, that holds the log and stable store of every
// Raft group the node runs, with one committer that writes every group's
// pending appends, deletes and votes as one write and one fdatasync. A
// node with N groups thus pays one sync for all of them where one file per
// group paid N: the multi-Raft layout of TiKV's and CockroachDB's engines,
// in the shape of etcd's WAL.
//
// Each group sees its part as a raft.LogStore and raft.StableStore (Log).
// A write returns once the fdatasync holding it is done, so raft's
// durability contract holds unchanged. The committer does not wait for more
// writes: it writes what is queued as soon as the last sync is done, so a
// lone group pays no added latency, and under load the queue that builds
// during one sync is the next one's batch (group commit).
//
// The node keeps, in memory, where each group's entries are (a file and an
// offset per entry) and each group's stable keys; reads are one pread. A
// start rebuilds that by reading the segments, checking every record's
// CRC. The last segment may end in a record a crash cut short: it is cut
// off there (it was never acknowledged). Damage anywhere else is an error
// that names the file and offset.
//
// Segments are begun at a size (Config.SegmentSize) with a checkpoint of
// every group's name and stable keys, so an old segment can be deleted
// once no live entry is in it; the oldest segments' live entries (an idle
// group's log, which no snapshot compacts) are copied forward into the new
// segment when too many segments are kept. Entries are deleted by records
// that say so (raft's compaction deletes a prefix, a follower's conflict a
// suffix).
//
// Import and Export move one group's log between this log and a
// raft-boltdb file of its own (the layout before this package), for a data
// dir's upgrade and its rollback.
package nodelog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/linkraft/linkraft/internal/atomicfile"
)

// ErrClosed is returned by every operation on a closed Store or Log.
var ErrClosed = errors.New("nodelog: closed")

// ErrKeyNotFound is returned by Get and GetUint64 for a key never set. Its
// text is what hashicorp/raft compares against ("not found").
var ErrKeyNotFound = errors.New("not found")

// ErrLocked is returned by Open when another process (a running node)
// holds the log for longer than Config.Timeout.
var ErrLocked = errors.New("nodelog: held by another process")

// errBroken wraps the error that broke the log: a failed sync, after which
// what the disk holds is unknown, so nothing more is written until the
// node restarts and reads it again.
var errBroken = errors.New("nodelog: a sync failed; restart the node")

// Config configures a Store.
type Config struct {
	// Path is the log's directory (created if missing).
	Path string
	// Timeout bounds the wait for the log's lock, held by another process
	// (a running node); 0 means 5 s. The error then wraps ErrLocked.
	Timeout time.Duration
	// SegmentSize is the size at which a segment ends and the next begins;
	// 0 means DefaultSegmentSize.
	SegmentSize int64
	// Logger tells of a torn tail cut off at start; nil logs nothing.
	Logger *slog.Logger
}

// DefaultSegmentSize is a segment's size unless configured.
const DefaultSegmentSize = 16 << 20

// keepSegments is how many full segments with live entries are kept
// before the oldest one's live entries are copied forward.
const keepSegments = 3

// maxBatch bounds the writes gathered into one sync.
const maxBatch = 512

// Store is the node's log and its committer.
type Store struct {
	dir     string
	segSize int64
	lock    *os.File
	log     *slog.Logger

	// mu guards groups, segs and every group's contents and segment's
	// live count. Readers hold it shared; the committer alone changes
	// them, under it exclusively, so it reads them without it.
	mu     sync.RWMutex
	groups map[string]*group
	segs   []*segment // oldest first; the last is the active one
	nextID uint64

	// The committer's own.
	buf        []byte
	broken     error
	rotateFrom time.Time // a failed rotation is retried from then

	reqs chan *request
	quit chan struct{}
	done chan struct{}
	once sync.Once
	// commits counts the syncs of written batches, writes the writes they
	// held; carried the bytes of entries copied forward.
	commits, writes, carried atomic.Uint64
}

// segment is one file of the log.
type segment struct {
	seq   uint64
	path  string
	f     *os.File
	size  int64 // bytes of records written
	alloc int64 // bytes preallocated (zeros past size)
	live  int64 // bytes of live entries
}

// allocChunk is how far ahead of its records a segment is preallocated.
const allocChunk = 1 << 20

// reserve preallocates the segment's file to hold end bytes, a chunk
// ahead, where the file system can: appends then do not grow the file, and
// a sync writes data, not the file's new size. Where it cannot (a FUSE
// mount), appends grow the file. The chunk stays small: the data dir's
// quota counts it.
func (sg *segment) reserve(end int64) {
	if end <= sg.alloc {
		return
	}
	want := max(end, sg.alloc) + allocChunk
	if preallocate(sg.f, sg.alloc, want-sg.alloc) == nil {
		sg.alloc = want
	} else {
		sg.alloc = end // grown by the write itself
	}
}

// loc is where an entry's bytes are.
type loc struct {
	seg *segment
	off int64
	n   int32
}

// group is one group's part of the log: its entries first to
// first+len(locs)-1, and its stable keys.
type group struct {
	id     uint64
	name   string
	first  uint64
	locs   []loc
	stable map[string][]byte
}

// last is the group's last index, 0 for an empty log.
func (g *group) last() uint64 {
	if len(g.locs) == 0 {
		return 0
	}
	return g.first + uint64(len(g.locs)) - 1
}

// Request kinds.
const (
	opEntries = iota + 1
	opDelete
	opStable
	opDrop
	opHook // tests: a function run in the committer
)

// request is one write waiting for the next sync.
type request struct {
	kind   int
	view   *Log
	name   string
	first  uint64
	ents   [][]byte
	lo, hi uint64
	key    []byte
	val    []byte
	hook   func() error
	err    chan error
}

// Open opens (or creates) the log in the directory cfg.Path, reads it
// back, and starts its committer.
func Open(cfg Config) (*Store, error) {
	if cfg.Path == "" {
		return nil, errors.New("nodelog: Config needs Path")
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	segSize := cfg.SegmentSize
	if segSize <= 0 {
		segSize = DefaultSegmentSize
	}
	if err := os.MkdirAll(cfg.Path, 0o700); err != nil {
		return nil, fmt.Errorf("raft log %s: %w", cfg.Path, err)
	}
	lock, err := lockDir(cfg.Path, timeout)
	if err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{dir: cfg.Path, segSize: segSize, lock: lock, log: logger, groups: map[string]*group{}, nextID: 1,
		reqs: make(chan *request, maxBatch), quit: make(chan struct{}), done: make(chan struct{})}
	if err := s.load(); err != nil {
		s.closeFiles()
		return nil, err
	}
	go s.commit()
	return s, nil
}

// lockDir takes the directory's lock file, waiting at most timeout.
func lockDir(dir string, timeout time.Duration) (*os.File, error) {
	p := filepath.Join(dir, "LOCK")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("raft log %s: %w", dir, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				err = ErrLocked
			}
			return nil, fmt.Errorf("raft log %s: %w", dir, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Path returns the log's directory.
func (s *Store) Path() string { return s.dir }

// Commits returns how many batches the committer has synced (one write
// and one fdatasync each) and how many writes (appends, deletes, votes of
// any group) they held: writes/commits is the group commit's batch.
func (s *Store) Commits() (commits, writes uint64) { return s.commits.Load(), s.writes.Load() }

// Segments returns how many segment files the log has, and the bytes of
// their records.
func (s *Store) Segments() (n int, bytes int64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, sg := range s.segs {
		bytes += sg.size
	}
	return len(s.segs), bytes
}

// Close stops the committer (writes still queued fail with ErrClosed) and
// closes the files. Every group using the log must be closed first.
func (s *Store) Close() error {
	s.once.Do(func() {
		close(s.quit)
		<-s.done
		s.closeFiles()
	})
	return nil
}

// closeFiles closes the segments and releases the lock.
func (s *Store) closeFiles() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sg := range s.segs {
		_ = sg.f.Close()
	}
	s.segs = nil
	if s.lock != nil {
		_ = s.lock.Close()
		s.lock = nil
	}
}

// Groups returns the names of the groups the log holds anything for.
func (s *Store) Groups() ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.segs == nil {
		return nil, ErrClosed
	}
	names := make([]string, 0, len(s.groups))
	for name := range s.groups {
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}

// Has reports whether the log holds anything for group name.
func (s *Store) Has(name string) (bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.segs == nil {
		return false, ErrClosed
	}
	_, ok := s.groups[name]
	return ok, nil
}

// Drop deletes group name's log and stable store (the group has left the
// node, and is closed). Dropping a group the log does not hold is not an
// error.
func (s *Store) Drop(name string) error {
	return s.do(&request{kind: opDrop, name: name})
}

// do queues r for the next sync and returns its answer.
func (s *Store) do(r *request) error {
	r.err = make(chan error, 1)
	select {
	case s.reqs <- r:
	case <-s.quit:
		return ErrClosed
	}
	select {
	case err := <-r.err:
		return err
	case <-s.done:
		// The committer answered everything it took before it stopped.
		select {
		case err := <-r.err:
			return err
		default:
			return ErrClosed
		}
	}
}

// commit is the committer: it takes whatever writes are queued, writes
// them and syncs once, and answers each, until Close.
func (s *Store) commit() {
	defer close(s.done)
	batch := make([]*request, 0, maxBatch)
	for {
		select {
		case <-s.quit:
			s.refuseQueued()
			return
		case r := <-s.reqs:
			batch = append(batch[:0], r)
		}
	gather:
		for len(batch) < maxBatch {
			select {
			case r := <-s.reqs:
				batch = append(batch, r)
			default:
				break gather
			}
		}
		s.writeBatch(batch)
		if s.broken == nil && s.active().size >= s.segSize && !time.Now().Before(s.rotateFrom) {
			if err := s.rotate(); err != nil {
				// The active segment takes more writes meanwhile.
				s.rotateFrom = time.Now().Add(time.Second)
			}
		}
	}
}

// refuseQueued answers the writes still queued at Close.
func (s *Store) refuseQueued() {
	for {
		select {
		case r := <-s.reqs:
			r.err <- ErrClosed
		default:
			return
		}
	}
}

// active is the segment written to.
func (s *Store) active() *segment { return s.segs[len(s.segs)-1] }

// effect is a record of a batch, to be applied to the groups in memory
// once the batch is durable.
type effect struct {
	typ    byte
	g      *group
	lo, hi uint64  // recDelete
	first  uint64  // recEntries
	pos    []int   // recEntries: each entry's offset in the batch
	lens   []int32 // recEntries
	key    []byte  // recStable
	val    []byte
}

// shadow is a group as the batch so far leaves it.
type shadow struct {
	g            *group
	first, count uint64
	dropped      bool
}

// writeBatch writes the batch's records, syncs, applies them in memory,
// and answers each request.
func (s *Store) writeBatch(batch []*request) {
	answers := make([]error, len(batch))
	if s.broken != nil {
		for _, r := range batch {
			r.err <- s.broken
		}
		return
	}
	buf := s.buf[:0]
	var effects []effect
	shadows := map[string]*shadow{}
	// state returns name's group as the batch leaves it, made (and named
	// by a record) when create is set and it has none.
	state := func(name string, create bool) *shadow {
		sh := shadows[name]
		if sh == nil {
			sh = &shadow{}
			if g := s.groups[name]; g != nil {
				sh.g, sh.first, sh.count = g, g.first, uint64(len(g.locs))
			}
			shadows[name] = sh
		}
		if create && (sh.g == nil || sh.dropped) {
			g := &group{id: s.nextID, name: name, stable: map[string][]byte{}}
			s.nextID++
			*sh = shadow{g: g}
			buf, _ = appendRecord(buf, recGroup, func(b []byte) []byte {
				return append(binary.AppendUvarint(b, g.id), name...)
			})
			effects = append(effects, effect{typ: recGroup, g: g})
		}
		return sh
	}
	del := func(sh *shadow, lo, hi uint64) {
		buf, _ = appendRecord(buf, recDelete, func(b []byte) []byte {
			return binary.AppendUvarint(binary.AppendUvarint(binary.AppendUvarint(b, sh.g.id), lo), hi)
		})
		effects = append(effects, effect{typ: recDelete, g: sh.g, lo: lo, hi: hi})
		last := sh.first + sh.count - 1
		switch {
		case lo <= sh.first && hi >= last:
			sh.count = 0
		case lo <= sh.first:
			sh.count -= hi + 1 - sh.first
			sh.first = hi + 1
		default:
			sh.count = lo - sh.first
		}
	}
	for i, r := range batch {
		if r.view != nil && r.name == "" {
			answers[i] = errNoName
			continue
		}
		if r.view != nil && r.view.closed.Load() {
			// Checked here too: a write queued before Close must not bring
			// back a group dropped after it.
			answers[i] = ErrClosed
			continue
		}
		switch r.kind {
		case opHook:
			answers[i] = r.hook()
		case opEntries:
			sh := state(r.name, true)
			if sh.count > 0 {
				last := sh.first + sh.count - 1
				if r.first != last+1 {
					// A follower's conflicting suffix, or a log that starts
					// again after a snapshot (a gap): what the new entries
					// do not follow on from goes first.
					lo := r.first
					if r.first > last+1 || r.first < sh.first {
						lo = sh.first
					}
					del(sh, lo, last)
				}
			}
			if sh.count == 0 {
				sh.first = r.first
			}
			e := effect{typ: recEntries, g: sh.g, first: r.first, pos: make([]int, len(r.ents)), lens: make([]int32, len(r.ents))}
			buf, _ = appendRecord(buf, recEntries, func(b []byte) []byte {
				b = binary.AppendUvarint(binary.AppendUvarint(binary.AppendUvarint(b, sh.g.id), r.first), uint64(len(r.ents)))
				for j, v := range r.ents {
					b = binary.AppendUvarint(b, uint64(len(v)))
					e.pos[j], e.lens[j] = len(b), int32(len(v))
					b = append(b, v...)
				}
				return b
			})
			effects = append(effects, e)
			sh.count += uint64(len(r.ents))
		case opDelete:
			sh := state(r.name, false)
			if sh.g == nil || sh.dropped || sh.count == 0 {
				continue
			}
			last := sh.first + sh.count - 1
			lo, hi := max(r.lo, sh.first), min(r.hi, last)
			if lo > hi {
				continue
			}
			if lo > sh.first && hi < last {
				answers[i] = fmt.Errorf("nodelog: group %s: deleting entries %d to %d from the middle of %d to %d", r.name, lo, hi, sh.first, last)
				continue
			}
			del(sh, lo, hi)
		case opStable:
			sh := state(r.name, true)
			buf, _ = appendRecord(buf, recStable, func(b []byte) []byte {
				b = binary.AppendUvarint(binary.AppendUvarint(b, sh.g.id), uint64(len(r.key)))
				return append(append(b, r.key...), r.val...)
			})
			effects = append(effects, effect{typ: recStable, g: sh.g, key: r.key, val: r.val})
		case opDrop:
			sh := state(r.name, false)
			if sh.g == nil || sh.dropped {
				continue
			}
			buf, _ = appendRecord(buf, recDrop, func(b []byte) []byte { return binary.AppendUvarint(b, sh.g.id) })
			effects = append(effects, effect{typ: recDrop, g: sh.g})
			sh.dropped = true
		}
	}
	s.keepBuf(buf)
	var err error
	if len(buf) > 0 {
		err = s.append(buf)
	}
	if err == nil && len(buf) > 0 {
		a := s.active()
		base := a.size
		s.mu.Lock()
		a.size += int64(len(buf))
		for _, e := range effects {
			s.apply(a, base, e)
		}
		s.mu.Unlock()
		s.commits.Add(1)
		s.writes.Add(uint64(len(batch)))
	}
	for i, r := range batch {
		if err != nil && answers[i] == nil {
			answers[i] = err
		}
		r.err <- answers[i]
	}
}

// append writes buf at the active segment's end and syncs it. A failed
// write is cut off again (what reached the file must not be read as
// records at the next start, after later writes overwrote its head); a
// failed sync, or a failed cut, breaks the log.
func (s *Store) append(buf []byte) error {
	a := s.active()
	a.reserve(a.size + int64(len(buf)))
	if _, err := a.f.WriteAt(buf, a.size); err != nil {
		if terr := a.f.Truncate(a.size); terr != nil {
			s.broken = fmt.Errorf("%w: %s: %v after a failed write: %v", errBroken, a.path, terr, err)
		}
		return fmt.Errorf("raft log %s: %w", a.path, err)
	}
	if faultNoSync() {
		return nil
	}
	if err := syscall.Fdatasync(int(a.f.Fd())); err != nil {
		s.broken = fmt.Errorf("%w: %s: %v", errBroken, a.path, err)
		return s.broken
	}
	return nil
}

// apply applies one durable record to the groups in memory. base is where
// the batch begins in segment a.
func (s *Store) apply(a *segment, base int64, e effect) {
	g := e.g
	switch e.typ {
	case recGroup:
		s.groups[g.name] = g
	case recDrop:
		for _, l := range g.locs {
			l.seg.live -= int64(l.n)
		}
		g.locs = nil
		if s.groups[g.name] == g {
			delete(s.groups, g.name)
		}
	case recStable:
		g.stable[string(e.key)] = e.val
	case recDelete:
		last := g.last()
		lo, hi := max(e.lo, g.first), min(e.hi, last)
		for i := lo; i <= hi && len(g.locs) > 0; i++ {
			l := g.locs[i-g.first]
			l.seg.live -= int64(l.n)
		}
		switch {
		case lo <= g.first && hi >= last:
			g.locs = nil
		case lo <= g.first:
			g.locs = g.locs[hi+1-g.first:]
			g.first = hi + 1
			if cap(g.locs) > 64 && len(g.locs) < cap(g.locs)/4 {
				g.locs = slices.Clone(g.locs) // let the dropped prefix go
			}
		default:
			g.locs = g.locs[:lo-g.first]
		}
	case recEntries:
		if len(g.locs) == 0 {
			g.first = e.first
		}
		for j := range e.pos {
			l := loc{seg: a, off: base + int64(e.pos[j]), n: e.lens[j]}
			a.live += int64(l.n)
			g.locs = append(g.locs, l)
		}
	}
}

// Sorted group lists, for checkpoints made the same way every time.
func (s *Store) sortedGroups() []*group {
	gs := make([]*group, 0, len(s.groups))
	for _, g := range s.groups {
		gs = append(gs, g)
	}
	sort.Slice(gs, func(i, j int) bool { return gs[i].id < gs[j].id })
	return gs
}

// checkpoint appends segment seq's header and checkpoint: every group's
// name and stable keys.
func (s *Store) checkpoint(b []byte, seq uint64) []byte {
	b, _ = appendRecord(b, recSegment, func(b []byte) []byte {
		return binary.BigEndian.AppendUint64(append(b, segmentMagic...), seq)
	})
	for _, g := range s.sortedGroups() {
		b, _ = appendRecord(b, recGroup, func(b []byte) []byte { return append(binary.AppendUvarint(b, g.id), g.name...) })
		keys := make([]string, 0, len(g.stable))
		for k := range g.stable {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			b, _ = appendRecord(b, recStable, func(b []byte) []byte {
				b = binary.AppendUvarint(binary.AppendUvarint(b, g.id), uint64(len(k)))
				return append(append(b, k...), g.stable[k]...)
			})
		}
	}
	return b
}

// writeSegment writes segment seq whole: buf (its header, checkpoint and
// carried entries) into a temporary file, synced, then renamed to the
// segment's name and the directory synced. A crash leaves the segment
// whole or absent, never a partial one that a start would read after the
// older segment still written to.
func (s *Store) writeSegment(seq uint64, buf []byte) (*segment, error) {
	p := filepath.Join(s.dir, segmentName(seq))
	tmp := p + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("raft log: %w", err)
	}
	sg := &segment{seq: seq, path: p, f: f, size: int64(len(buf))}
	sg.reserve(sg.size)
	_, err = f.WriteAt(buf, 0)
	if err == nil && !faultNoSync() {
		err = syscall.Fdatasync(int(f.Fd()))
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err == nil {
		err = atomicfile.SyncDir(s.dir)
	}
	if err != nil {
		f.Close()
		_ = os.Remove(tmp)
		return nil, fmt.Errorf("raft log %s: %w", p, err)
	}
	return sg, nil
}

// tmpSuffix marks a segment being written; a start removes any.
const tmpSuffix = ".tmp"

// carry is a live entry copied forward into a new segment.
type carry struct {
	g   *group
	i   int // in g.locs
	pos int // in the new segment
}

// rotate seals the active segment and begins the next.
func (s *Store) rotate() error {
	old := s.active()
	if err := old.f.Truncate(old.size); err != nil {
		return fmt.Errorf("raft log %s: %w", old.path, err)
	}
	old.alloc = old.size
	if err := old.f.Sync(); err != nil {
		s.broken = fmt.Errorf("%w: %s: %v", errBroken, old.path, err)
		return s.broken
	}
	return s.begin(old, true)
}

// begin writes the next segment: its checkpoint, and the live entries of
// the oldest segments before until (all of them when nil) that it
// replaces (carryForward; eager at a rotation); then makes it the active
// one and deletes those.
func (s *Store) begin(until *segment, eager bool) error {
	seq := uint64(1)
	if len(s.segs) > 0 {
		seq = s.segs[len(s.segs)-1].seq + 1
	}
	buf := s.checkpoint(s.buf[:0], seq)
	victims, carried, buf, err := s.carryForward(until, eager, buf)
	if err == nil {
		var next *segment
		if next, err = s.writeSegment(seq, buf); err == nil {
			s.mu.Lock()
			for _, c := range carried {
				l := &c.g.locs[c.i]
				l.seg.live -= int64(l.n)
				l.seg, l.off = next, int64(c.pos)
				next.live += int64(l.n)
				s.carried.Add(uint64(l.n))
			}
			s.segs = append(s.segs, next)
			s.mu.Unlock()
		}
	}
	s.keepBuf(buf)
	if err != nil {
		return err
	}
	return s.remove(victims)
}

// keepBuf keeps buf's memory for the next batch, unless a large batch
// grew it.
func (s *Store) keepBuf(buf []byte) {
	if cap(buf) > 4<<20 {
		buf = nil
	}
	s.buf = buf[:0]
}

// carryForward picks the oldest segments to delete as a segment begins
// (before until, or all when nil), and appends their live entries to buf:
// those with no live entry; (eager) one whose live entries are few, within
// a copy budget; and, past keepSegments, the oldest ones whatever they hold
// while the log's segments hold more than twice its live bytes (and a few
// segments over), so that an idle group's entries, however large, do not
// keep every later segment, while a log that is mostly live (a bulk load
// its snapshots have not caught up with) is not copied again and again.
// A start is not eager: a node restarted again and again copies nothing
// until segments pile up.
func (s *Store) carryForward(until *segment, eager bool, buf []byte) ([]*segment, []carry, []byte, error) {
	var victims []*segment
	var total, live int64
	for _, sg := range s.segs {
		total, live = total+sg.size, live+sg.live
	}
	budget := s.segSize / 2
	for i, sg := range s.segs {
		if sg == until {
			break
		}
		if sg.live > 0 {
			kept := len(s.segs) - i // this one and those after it
			small := eager && sg.live <= s.segSize/4 && sg.live <= budget
			wasteful := kept > keepSegments && total > 2*live+keepSegments*s.segSize
			if !small && !wasteful {
				break // only a prefix of the segments goes
			}
			budget -= sg.live
		}
		total -= sg.size - sg.live // its live entries move to the new one
		victims = append(victims, sg)
	}
	var carried []carry
	for _, g := range s.sortedGroups() {
		for i := 0; i < len(g.locs); {
			if !slices.Contains(victims, g.locs[i].seg) {
				i++
				continue
			}
			j := i
			for j < len(g.locs) && slices.Contains(victims, g.locs[j].seg) {
				j++
			}
			var err error
			buf, _ = appendRecord(buf, recEntries, func(b []byte) []byte {
				b = binary.AppendUvarint(binary.AppendUvarint(binary.AppendUvarint(b, g.id), g.first+uint64(i)), uint64(j-i))
				for k := i; k < j && err == nil; k++ {
					l := g.locs[k]
					b = binary.AppendUvarint(b, uint64(l.n))
					carried = append(carried, carry{g: g, i: k, pos: len(b)})
					b = append(b, make([]byte, l.n)...)
					_, err = l.seg.f.ReadAt(b[len(b)-int(l.n):], l.off)
				}
				return b
			})
			if err != nil {
				return nil, nil, buf, err
			}
			i = j
		}
	}
	return victims, carried, buf, nil
}

// remove deletes segments no longer in the log, oldest first, each
// unlink made durable before the next: a crash never leaves an older
// segment (whose records later ones assume gone) behind a deleted one. A
// failed removal stops there; the rest stay in the log (they hold no live
// entry) and go at the next segment's beginning.
func (s *Store) remove(victims []*segment) error {
	for _, sg := range victims {
		if err := os.Remove(sg.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("raft log: %w", err)
		}
		if err := atomicfile.SyncDir(s.dir); err != nil {
			return fmt.Errorf("raft log: %w", err)
		}
		s.mu.Lock()
		s.segs = slices.DeleteFunc(s.segs, func(x *segment) bool { return x == sg })
		s.mu.Unlock()
		_ = sg.f.Close()
	}
	return nil
}

// segmentFiles lists the directory's segments by sequence number.
func segmentFiles(dir string) ([]uint64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var seqs []uint64
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".seg") {
			continue
		}
		var seq uint64
		if _, err := fmt.Sscanf(name, "%016x.seg", &seq); err != nil || segmentName(seq) != name {
			return nil, fmt.Errorf("raft log %s: %s is not a segment's name", dir, name)
		}
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	return seqs, nil
}
