package analytics

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"time"

	"github.com/linkraft/linkraft/link"
)

func hourKey(h int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(h)) }

func hourOf(ns int64) int64 { return ns / int64(time.Hour) }

func appendVisitKey(b []byte, code string, t int64, seq uint32) []byte {
	b = append(b, code...)
	b = append(b, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(t))
	return binary.BigEndian.AppendUint32(b, seq)
}

func visitKey(code string, t int64, seq uint32) []byte {
	return appendVisitKey(make([]byte, 0, len(code)+13), code, t, seq)
}

// VisitBatch is visits encoded back to back, as the pipeline collects
// them: bytes and offsets only, so the garbage collector has nothing in it
// to scan however many visits wait for the next write.
type VisitBatch struct {
	buf  []byte
	ends []int
}

// Append adds v.
func (b *VisitBatch) Append(v *link.Visit) {
	b.buf = appendVisit(b.buf, v)
	b.ends = append(b.ends, len(b.buf))
}

// Len is the number of visits in b.
func (b *VisitBatch) Len() int { return len(b.ends) }

// Reset empties b, keeping its memory.
func (b *VisitBatch) Reset() { b.buf, b.ends = b.buf[:0], b.ends[:0] }

// Raw visits are stored grouped: one record per code per hour per write
// (up to maxGroupVisits visits within maxGroupSpan), keyed by the code and
// its last visit's time, where a record per visit made a B+tree insert
// per click (a sixth of the node's CPU under a browser-like redirect
// load). Each write's records of an hour are a segment: a bucket of their
// own under the hour's segmentsKey bucket, keyed by the write's newest
// visit time and a sequence number, so that a write fills fresh pages in
// order instead of rewriting every page of the hour so far (records of
// thousands of codes keyed code first land all over one B+tree: each
// write rewrote the whole hour). Files written before hold single visits
// (visitFormat) directly in the hour's bucket; both are read.
var segmentsKey = []byte{0} // no code starts with 0x00

// eachVisit calls fn with every visit record in a stored value: a group,
// in the order written (oldest first), or a single visit.
func eachVisit(val []byte, fn func(rec []byte) error) error {
	if len(val) == 0 || val[0] != visitGroupFormat {
		return fn(val)
	}
	for b := val[1:]; len(b) > 0; {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return errBadVisit
		}
		if err := fn(b[k : k+int(n)]); err != nil {
			return err
		}
		b = b[k+int(n):]
	}
	return nil
}

// A visit is stored as version byte 1, the time (Unix ns, 8 bytes BE), the
// bot flag and six length-prefixed strings. Files written before that hold
// JSON (first byte '{'); they are still read.
const visitFormat = 1

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
