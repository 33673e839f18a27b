package nodelog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/linkraft/linkraft/internal/atomicfile"
)

// replayed is a group as the records read so far leave it; entries can
// come back out of index order (a run copied forward sits after the runs
// that follow it), so they are kept by index until the end.
type replayed struct {
	id     uint64
	name   string
	ents   map[uint64]loc
	stable map[string][]byte
}

// load reads the log's segments back into memory, cuts a torn tail off the
// last one, and begins a new segment (so nothing is ever written after a
// tail that a crash left).
func (s *Store) load() error {
	tmps, err := filepath.Glob(filepath.Join(s.dir, "*.seg"+tmpSuffix))
	if err != nil {
		return err
	}
	for _, p := range tmps { // segments a crash cut off as they were begun
		if err := os.Remove(p); err != nil {
			return fmt.Errorf("raft log: %w", err)
		}
	}
	seqs, err := segmentFiles(s.dir)
	if err != nil {
		return fmt.Errorf("raft log %s: %w", s.dir, err)
	}
	byID := map[uint64]*replayed{}
	get := func(id uint64) *replayed {
		r := byID[id]
		if r == nil {
			r = &replayed{id: id, ents: map[uint64]loc{}, stable: map[string][]byte{}}
			byID[id] = r
		}
		s.nextID = max(s.nextID, id+1)
		return r
	}
	for i, seq := range seqs {
		if i > 0 && seq != seqs[i-1]+1 {
			// Segments go oldest first, so one missing between two is
			// not the log's doing (a removal cut short, a file lost).
			return fmt.Errorf("raft log %s: segment %s is missing between %s and %s", s.dir, segmentName(seqs[i-1]+1), segmentName(seqs[i-1]), segmentName(seq))
		}
		sg, err := s.readSegment(seq, i == len(seqs)-1, get, byID)
		if err != nil {
			return err
		}
		if sg != nil {
			s.segs = append(s.segs, sg)
		}
	}
	// Every group's entries, now in index order, and its name.
	names := map[string]bool{}
	for _, r := range byID {
		if r.name == "" {
			return fmt.Errorf("raft log %s: group %d has records but no name", s.dir, r.id)
		}
		if names[r.name] {
			return fmt.Errorf("raft log %s: two groups named %q", s.dir, r.name)
		}
		names[r.name] = true
		g := &group{id: r.id, name: r.name, stable: r.stable}
		idx := make([]uint64, 0, len(r.ents))
		for i := range r.ents {
			idx = append(idx, i)
		}
		slices.Sort(idx)
		for k, i := range idx {
			if k > 0 && i != idx[k-1]+1 {
				return fmt.Errorf("raft log %s: group %s's entries skip from %d to %d", s.dir, r.name, idx[k-1], i)
			}
			l := r.ents[i]
			l.seg.live += int64(l.n)
			g.locs = append(g.locs, l)
		}
		if len(idx) > 0 {
			g.first = idx[0]
		}
		s.groups[r.name] = g
	}
	// A new segment, always: nothing is written after a tail that a
	// crash left. The oldest segments go as at a rotation.
	return s.begin(nil, false)
}

// readSegment reads segment seq's records into the groups by id (get
// makes one), and returns the segment, open for reads; nil if it held no
// record (a segment begun when a crash came), which is removed. A record
// that is not whole ends the last segment, which is cut there; in any
// other it is damage.
func (s *Store) readSegment(seq uint64, last bool, get func(uint64) *replayed, byID map[uint64]*replayed) (*segment, error) {
	p := filepath.Join(s.dir, segmentName(seq))
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("raft log: %w", err)
	}
	sg := &segment{seq: seq, path: p}
	damaged := func(off int, what string) error {
		return fmt.Errorf("raft log %s: damaged at offset %d: %s", p, off, what)
	}
	off, torn := 0, false
	for {
		typ, payload, n, err := readRecord(data[off:])
		if err != nil && last {
			torn = true // a tail a crash cut short: never acknowledged
			break
		}
		if err != nil {
			return nil, damaged(off, err.Error())
		}
		if n == 0 {
			if !last && !allZero(data[off:]) {
				return nil, damaged(off, "a record's header is zeros, and data follows")
			}
			break
		}
		if off == 0 {
			if typ != recSegment || len(payload) != len(segmentMagic)+8 || string(payload[:len(segmentMagic)]) != string(segmentMagic) {
				return nil, damaged(0, "not a segment of this log's format")
			}
			if got := binary.BigEndian.Uint64(payload[len(segmentMagic):]); got != seq {
				return nil, damaged(0, fmt.Sprintf("the header says segment %d", got))
			}
		} else if err := s.replayRecord(sg, int64(off+headerSize), typ, payload, get, byID); err != nil {
			return nil, damaged(off, err.Error())
		}
		off += n
	}
	if off == 0 {
		// Not even a header: nothing of it was ever acknowledged.
		if err := os.Remove(p); err != nil {
			return nil, fmt.Errorf("raft log: %w", err)
		}
		return nil, atomicfile.SyncDir(s.dir)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("raft log: %w", err)
	}
	sg.f, sg.size = f, int64(off)
	if last && int64(len(data)) != sg.size {
		// Sealed where its records end: a torn record, or the zeros of a
		// preallocated file, go.
		if err := f.Truncate(sg.size); err == nil {
			err = f.Sync()
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("raft log %s: %w", p, err)
		}
		if torn {
			s.log.Warn("raft log: a record a crash left unfinished cut off (it was never acknowledged)",
				"segment", p, "offset", off, "bytes", len(data)-off)
		}
	}
	return sg, nil
}

// errRecord says a record's payload does not parse.
var errRecord = errors.New("a record that does not parse")

// replayRecord applies one record, whose payload starts at offset at in
// segment sg, to the groups being read back.
func (s *Store) replayRecord(sg *segment, at int64, typ byte, p []byte, get func(uint64) *replayed, byID map[uint64]*replayed) error {
	id, k := binary.Uvarint(p)
	if k <= 0 {
		return errRecord
	}
	rest := p[k:]
	switch typ {
	case recGroup:
		if len(rest) == 0 {
			return errRecord
		}
		get(id).name = string(rest)
	case recDrop:
		delete(byID, id)
		s.nextID = max(s.nextID, id+1)
	case recStable:
		kl, k := binary.Uvarint(rest)
		if k <= 0 || kl == 0 || kl > uint64(len(rest)-k) {
			return errRecord
		}
		rest = rest[k:]
		get(id).stable[string(rest[:kl])] = append([]byte(nil), rest[kl:]...)
	case recDelete:
		v, _, err := uvarints(rest, 2)
		if err != nil || v[0] > v[1] {
			return errRecord
		}
		r := get(id)
		if v[1]-v[0] >= uint64(len(r.ents)) {
			for i := range r.ents {
				if i >= v[0] && i <= v[1] {
					delete(r.ents, i)
				}
			}
		} else {
			for i := v[0]; i <= v[1]; i++ {
				delete(r.ents, i)
			}
		}
	case recEntries:
		v, body, err := uvarints(rest, 2)
		if err != nil || v[0] == 0 || v[1] > uint64(len(body)) {
			return errRecord
		}
		r := get(id)
		start := at + int64(len(p)-len(body))
		for i := uint64(0); i < v[1]; i++ {
			n, k := binary.Uvarint(body)
			if k <= 0 || n > uint64(len(body)-k) || n > maxRecord {
				return errRecord
			}
			off := start + int64(k)
			r.ents[v[0]+i] = loc{seg: sg, off: off, n: int32(n)}
			body = body[k+int(n):]
			start = off + int64(n)
		}
		if len(body) != 0 {
			return errRecord
		}
	default:
		return fmt.Errorf("a record of unknown type %q", typ)
	}
	return nil
}
