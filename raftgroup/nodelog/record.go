package nodelog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/hashicorp/raft"
)

// A segment file is a sequence of records, each a 9-byte header and a
// payload:
//
//	crc    uint32 (big-endian) CRC-32C of the length, the type and the payload
//	length uint32 (big-endian) of the payload
//	type   byte
//	payload
//
// The first record of every segment is its header (recSegment); the next
// ones are its checkpoint: a recGroup for every group and a recStable for
// every stable key the node's log held when the segment was begun, so
// older segments can go without losing a name or a vote. Nine zero bytes
// where a header would start end the segment's data (the rest of a
// preallocated file).
const (
	recSegment byte = 'H' // magic, then the segment's sequence number (uint64)
	recGroup   byte = 'G' // group id (uvarint), then its name
	recDrop    byte = 'X' // group id: the group and all it held are gone
	recStable  byte = 'S' // group id, key length (uvarint), key, value
	recEntries byte = 'E' // group id, first index, count (uvarints), then each entry as a uvarint length and encodeLog's bytes
	recDelete  byte = 'D' // group id, lo, hi (uvarints): entries lo to hi inclusive are gone
)

// headerSize is a record's header's length.
const headerSize = 9

// maxRecord bounds a record's payload: larger is damage, not data (a
// Raft batch of bulk creates is a few MiB).
const maxRecord = 1 << 30

// segmentMagic begins a segment header's payload: the format and its
// version.
var segmentMagic = []byte("linkraft-raft-log\x01")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendRecord appends a record of type typ whose payload is what fill
// appends, and returns the buffer and where the payload starts in it.
func appendRecord(b []byte, typ byte, fill func([]byte) []byte) ([]byte, int) {
	start := len(b)
	b = append(b, make([]byte, headerSize)...)
	b[start+8] = typ
	payload := len(b)
	b = fill(b)
	binary.BigEndian.PutUint32(b[start+4:], uint32(len(b)-payload))
	binary.BigEndian.PutUint32(b[start:], crc32.Checksum(b[start+4:], castagnoli))
	return b, payload
}

// errTorn says the bytes at an offset are not a whole, intact record: the
// end of what a crash let reach the disk, in the last segment; damage in
// any other.
var errTorn = errors.New("not a whole record")

// readRecord reads the record at the start of b: its type, payload and
// length in all. n is 0 at the end of the segment's data (nine zero bytes,
// or nothing).
func readRecord(b []byte) (typ byte, payload []byte, n int, err error) {
	if len(b) == 0 {
		return 0, nil, 0, nil
	}
	if len(b) < headerSize {
		if allZero(b) {
			return 0, nil, 0, nil
		}
		return 0, nil, 0, errTorn
	}
	if allZero(b[:headerSize]) {
		return 0, nil, 0, nil
	}
	size := binary.BigEndian.Uint32(b[4:])
	if size > maxRecord || int64(size) > int64(len(b)-headerSize) {
		return 0, nil, 0, errTorn
	}
	end := headerSize + int(size)
	if crc32.Checksum(b[4:end], castagnoli) != binary.BigEndian.Uint32(b) {
		return 0, nil, 0, errTorn
	}
	return b[8], b[headerSize:end], end, nil
}

// allZero reports whether every byte of b is zero.
func allZero(b []byte) bool {
	for len(b) > 0 {
		n := min(len(b), len(zeros))
		if !bytes.Equal(b[:n], zeros[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}

var zeros = make([]byte, 4096)

// uvarints reads n uvarints off p, and returns them and what follows.
func uvarints(p []byte, n int) ([]uint64, []byte, error) {
	out := make([]uint64, n)
	for i := range out {
		v, k := binary.Uvarint(p)
		if k <= 0 {
			return nil, nil, errTorn
		}
		out[i], p = v, p[k:]
	}
	return out, p, nil
}

// entryVersion is the first byte of every encoded entry.
const entryVersion = 1

// encodeLog is e without its index (the record gives it): version, term,
// type, the time it was appended (Unix nanoseconds, 0 for none), then data
// and extensions, each after its length as a uvarint.
func encodeLog(e *raft.Log) []byte {
	return appendLog(make([]byte, 0, entrySize(e)), e)
}

// entrySize bounds encodeLog's length for e.
func entrySize(e *raft.Log) int {
	return 1 + 8 + 1 + 8 + 2*binary.MaxVarintLen64 + len(e.Data) + len(e.Extensions)
}

// appendLog appends encodeLog's bytes for e to b.
func appendLog(b []byte, e *raft.Log) []byte {
	b = append(b, entryVersion)
	b = binary.BigEndian.AppendUint64(b, e.Term)
	b = append(b, byte(e.Type))
	var at int64
	if !e.AppendedAt.IsZero() {
		at = e.AppendedAt.UnixNano()
	}
	b = binary.BigEndian.AppendUint64(b, uint64(at))
	b = binary.AppendUvarint(b, uint64(len(e.Data)))
	b = append(b, e.Data...)
	b = binary.AppendUvarint(b, uint64(len(e.Extensions)))
	return append(b, e.Extensions...)
}

// errCorrupt says an entry's bytes do not decode.
var errCorrupt = errors.New("damaged entry")

// decodeLog decodes v (encodeLog's) into out. out's data and extensions
// are slices of v, which the caller hands over (a read's own buffer).
func decodeLog(v []byte, out *raft.Log) error {
	if len(v) < 18 || v[0] != entryVersion {
		return errCorrupt
	}
	out.Term = binary.BigEndian.Uint64(v[1:])
	out.Type = raft.LogType(v[9])
	out.AppendedAt = time.Time{}
	if at := int64(binary.BigEndian.Uint64(v[10:])); at != 0 {
		out.AppendedAt = time.Unix(0, at)
	}
	rest := v[18:]
	var err error
	if out.Data, rest, err = chunk(rest); err != nil {
		return err
	}
	if out.Extensions, rest, err = chunk(rest); err != nil {
		return err
	}
	if len(rest) != 0 {
		return errCorrupt
	}
	return nil
}

// chunk reads one length-prefixed byte string off b: a slice of b, capped
// at its end (nil when empty), and what follows it.
func chunk(b []byte) ([]byte, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, errCorrupt
	}
	b = b[k:]
	if n == 0 {
		return nil, b, nil
	}
	return b[:n:n], b[n:], nil
}

// segmentName is the file name of segment seq.
func segmentName(seq uint64) string { return fmt.Sprintf("%016x.seg", seq) }
