// Package boltcheck finds a damaged bbolt file before bbolt opens it.
//
// A file written with NoFreelistSync has no stored freelist: bbolt's Open
// rebuilds it by walking every page, on a goroutine of its own, and a page
// that is not what its parent says (a torn write, a bad sector, a file
// truncated or overwritten) makes that goroutine panic on an assertion.
// That panic cannot be recovered: the process dies naming neither the file
// nor what to do. Check walks the same tree first, with reads of its own
// (no mmap) and every bound checked, and returns an error naming the page
// instead; the caller names the file and the repair.
package boltcheck

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
)

// ErrDamaged is wrapped by every error of a file whose pages do not hold
// together.
var ErrDamaged = errors.New("bbolt file damaged")

// Page flags and element layouts of bbolt's file format (version 2), in
// the machine's byte order (little-endian on the platforms linkraft
// ships for).
const (
	pageHeader     = 16 // id u64, flags u16, count u16, overflow u32
	branchFlag     = 0x01
	leafFlag       = 0x02
	elemSize       = 16 // branch: pos, ksize u32, pgid u64; leaf: flags, pos, ksize, vsize u32
	bucketLeafFlag = 0x01
	bucketHeader   = 16 // root pgid u64, sequence u64
	magic          = 0xED0CDAED
)

var le = binary.LittleEndian

// Check walks the bbolt file at path from its newer valid meta page
// through every bucket's pages, and returns an error wrapping ErrDamaged
// for the first page that is out of bounds, not of its expected kind, or
// whose elements point outside it. A file that does not exist, or is
// empty, is not damaged (bbolt makes it).
func Check(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() == 0 {
		return nil
	}
	c := &checker{f: f, size: fi.Size()}
	root, err := c.meta()
	if err != nil {
		return err
	}
	// One bit a page: the high-water mark is within the file, so a 1 TiB
	// file costs 32 MiB here.
	c.seen = make([]uint64, (c.hwm+63)/64)
	return c.walk(root, 0)
}

// HighWater returns the bytes of the bbolt file at path up to its
// high-water mark (its page count times its page size, from the newer
// valid meta page): bbolt grows a file ahead of use, in steps of up to
// 16 MiB, and the bytes past the mark hold nothing.
func HighWater(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	c := &checker{f: f, size: fi.Size()}
	if _, err := c.meta(); err != nil {
		return 0, err
	}
	return int64(c.hwm * c.pageSize), nil
}

type checker struct {
	f        *os.File
	size     int64
	pageSize uint64
	hwm      uint64   // pages below the high-water mark
	seen     []uint64 // a bit per page walked
	bufs     [][]byte // a page buffer per depth, reused
}

func (c *checker) walked(id uint64) bool { return c.seen[id/64]&(1<<(id%64)) != 0 }

func (c *checker) mark(id uint64) { c.seen[id/64] |= 1 << (id % 64) }

func damaged(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrDamaged, fmt.Sprintf(format, args...))
}

// meta reads both meta pages and keeps the valid one with the higher
// transaction id; it returns the root bucket's page.
func (c *checker) meta() (uint64, error) {
	var buf [pageHeader + 64]byte
	var best struct{ txid, root, pgid, pageSize uint64 }
	found := false
	off := int64(0)
	for i := range 2 {
		if _, err := c.f.ReadAt(buf[:], off); err != nil {
			if i == 0 {
				return 0, damaged("meta page 0 unreadable: %v", err)
			}
			break
		}
		m := buf[pageHeader:]
		pageSize := uint64(le.Uint32(m[8:]))
		if i == 0 {
			if pageSize < 512 || pageSize > 1<<20 || pageSize&(pageSize-1) != 0 {
				pageSize = 4096 // meta 0 is torn: try meta 1 at the usual size
			}
			off = int64(pageSize)
		}
		h := fnv.New64a()
		_, _ = h.Write(m[:56])
		if le.Uint32(m[0:]) != magic || h.Sum64() != le.Uint64(m[56:]) {
			continue
		}
		if txid := le.Uint64(m[48:]); !found || txid > best.txid {
			best.txid, best.root, best.pgid, best.pageSize = txid, le.Uint64(m[16:]), le.Uint64(m[40:]), pageSize
			found = true
		}
	}
	if !found {
		return 0, damaged("no valid meta page")
	}
	c.pageSize, c.hwm = best.pageSize, best.pgid
	if int64(c.hwm*c.pageSize) > c.size {
		return 0, damaged("the meta page counts %d pages of %d bytes, the file holds %d bytes (truncated?)", c.hwm, c.pageSize, c.size)
	}
	return best.root, nil
}

// walk checks page id (expected to be a branch or a leaf at depth) and
// everything below it.
func (c *checker) walk(id uint64, depth int) error {
	if depth > 64 {
		return damaged("page %d: the tree is more than 64 levels deep (a cycle?)", id)
	}
	if id < 2 || id >= c.hwm {
		return damaged("page %d: outside the file's %d pages", id, c.hwm)
	}
	if c.walked(id) {
		return damaged("page %d: reached twice", id)
	}
	c.mark(id)
	// One read for the page, a second only for its overflow pages, into
	// the buffer of its depth (its children use the next ones).
	for len(c.bufs) <= depth {
		c.bufs = append(c.bufs, nil)
	}
	page := c.bufs[depth][:0]
	if cap(page) < int(c.pageSize) {
		page = make([]byte, c.pageSize)
	}
	page = page[:c.pageSize]
	if _, err := c.f.ReadAt(page, int64(id*c.pageSize)); err != nil {
		return damaged("page %d: unreadable: %v", id, err)
	}
	if got := le.Uint64(page[0:]); got != id {
		return damaged("page %d identifies itself as page %d", id, got)
	}
	overflow := uint64(le.Uint32(page[12:]))
	if id+overflow >= c.hwm {
		return damaged("page %d: %d overflow pages run past the file's %d pages", id, overflow, c.hwm)
	}
	flags := le.Uint16(page[8:])
	if flags != branchFlag && flags != leafFlag {
		return damaged("page %d: flags %#x, want a branch or a leaf", id, flags)
	}
	if overflow > 0 {
		page = append(page, make([]byte, overflow*c.pageSize)...)
		if _, err := c.f.ReadAt(page[c.pageSize:], int64((id+1)*c.pageSize)); err != nil {
			return damaged("page %d: overflow unreadable: %v", id, err)
		}
		for i := range overflow {
			c.mark(id + 1 + i)
		}
	}
	c.bufs[depth] = page
	return c.elements(id, page, depth)
}

// elements checks the elements of page (its bytes from its header on),
// and walks its children and the buckets it holds.
func (c *checker) elements(id uint64, page []byte, depth int) error {
	flags, count := le.Uint16(page[8:]), int(le.Uint16(page[10:]))
	if pageHeader+count*elemSize > len(page) {
		return damaged("page %d: %d elements do not fit in it", id, count)
	}
	for i := range count {
		e := pageHeader + i*elemSize
		el := page[e : e+elemSize]
		if flags == branchFlag {
			pos, ksize := uint64(le.Uint32(el[0:])), uint64(le.Uint32(el[4:]))
			if uint64(e)+pos+ksize > uint64(len(page)) {
				return damaged("page %d: branch element %d points past the page", id, i)
			}
			if err := c.walk(le.Uint64(el[8:]), depth+1); err != nil {
				return err
			}
			continue
		}
		eflags, pos, ksize, vsize := le.Uint32(el[0:]), uint64(le.Uint32(el[4:])), uint64(le.Uint32(el[8:])), uint64(le.Uint32(el[12:]))
		start := uint64(e) + pos + ksize
		if start+vsize > uint64(len(page)) {
			return damaged("page %d: leaf element %d points past the page", id, i)
		}
		if eflags&bucketLeafFlag == 0 {
			continue
		}
		v := page[start : start+vsize]
		if len(v) < bucketHeader {
			return damaged("page %d: bucket %d's header is %d bytes", id, i, len(v))
		}
		if root := le.Uint64(v); root != 0 {
			if err := c.walk(root, depth+1); err != nil {
				return err
			}
			continue
		}
		// An inline bucket: its page follows the header in the value.
		inline := v[bucketHeader:]
		if len(inline) < pageHeader {
			return damaged("page %d: inline bucket %d is %d bytes", id, i, len(inline))
		}
		if f := le.Uint16(inline[8:]); f != leafFlag {
			return damaged("page %d: inline bucket %d has flags %#x, want a leaf", id, i, f)
		}
		if err := c.elements(id, inline, depth+1); err != nil {
			return err
		}
	}
	return nil
}
