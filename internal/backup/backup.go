// Package backup is the file format of a cluster backup: what
// GET /admin/v1/backup streams and `linknode restore` reads.
//
// A backup is the magic line, then frames, the last of which is the
// manifest:
//
//	"LINKRAFT BACKUP\n"
//	frame*: kind (1 byte) | length (4 bytes, big-endian) | body | CRC-32C of the three (4 bytes)
//
// The first frame is the header (format version, the cluster's settings),
// then the meta group's part (the next free ID, API keys, the blocklist),
// then each shard's records in any number of frames, and last the manifest:
// how many links and tombstones each shard held and the SHA-256 of every
// byte before the manifest. A reader checks each frame's CRC as it goes,
// the counts and the digest at the end, and that nothing follows: a
// damaged, truncated or extended file is refused with where and why.
// Restore reads the file twice, once to check it and once to apply it, so
// a bad file writes nothing.
package backup

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"time"

	"github.com/linkraft/linkraft/internal/wire"
)

// Magic opens every backup file.
const Magic = "LINKRAFT BACKUP\n"

// Format is the version of the format this package writes. A reader
// refuses a higher one.
const Format = 1

// MaxFrame bounds a frame's body.
const MaxFrame = 4 << 20

// recordBudget is the size at which the writer ends a frame of records.
const recordBudget = 1 << 20

// Errors a reader wraps.
var (
	// ErrNotBackup: the file does not start with Magic.
	ErrNotBackup = errors.New("not a linkraft backup")
	// ErrDamaged: a frame's checksum, length or contents are wrong, or the
	// manifest disagrees with what came before it.
	ErrDamaged = errors.New("backup damaged")
	// ErrTruncated: the file ends before its manifest.
	ErrTruncated = errors.New("backup truncated")
	// ErrNewerFormat: the file was written in a format this version does
	// not know.
	ErrNewerFormat = errors.New("backup written by a newer version")
)

// Frame kinds.
const (
	kindHeader   = 1
	kindMeta     = 2
	kindRecords  = 3
	kindManifest = 4
)

// Header is a backup's first frame.
type Header struct {
	Format    uint32
	ClusterID string
	// CreatedAt is when the backup began; Node wrote it, running Version.
	CreatedAt time.Time
	Node      string
	Version   string
	// Settings is the cluster's settings as its meta group stores them
	// (command.SetSettings' encoding): the shard count, the ring and the
	// code generator a restored cluster must keep.
	Settings []byte
}

// Meta is the meta group's part: what a new cluster must keep so that no
// code is handed out twice and the same keys open it.
type Meta struct {
	// NextID is the first ID no lease has covered.
	NextID uint64
	// Keys are the API keys, each a command.CreateKey's encoding.
	Keys [][]byte
	// Blocked are the blocked domains, each a command.SetBlocked's
	// encoding.
	Blocked [][]byte
}

// Record is one code of a shard: its link record (command.EncodeRecord:
// tombstones too) and, when it has any, its click totals and hours
// (command.ClickStats' encoding).
type Record struct {
	Code   string
	Link   []byte
	Clicks []byte
}

// ShardCount is what the manifest says of one shard.
type ShardCount struct {
	Shard uint32
	// Records counts the shard's records (tombstones included).
	Records uint64
	// ReadAt is the shard's Raft index the first read saw (after a
	// barrier): every write acknowledged before it is in the backup.
	ReadAt uint64
}

// Manifest is a backup's last frame.
type Manifest struct {
	Shards []ShardCount
	// Keys and Blocked count the meta part's entries.
	Keys, Blocked uint64
	// SHA256 is the digest of every byte before the manifest's frame.
	SHA256 []byte
	// NextID is the meta group's next free ID read again after every
	// shard (0 in a file from before it was written): a link created while
	// the backup ran may hold an ID leased after the meta part was read, so
	// a restore leases past the larger of the two.
	NextID uint64
}

// records is the body of a records frame.
type records struct {
	Shard   uint32
	Records []Record
}

var headerCodec = wire.NewCodec(nil,
	wire.Uint(1, func(h *Header) *uint32 { return &h.Format }),
	wire.String(2, func(h *Header) *string { return &h.ClusterID }),
	wire.Time(3, func(h *Header) *time.Time { return &h.CreatedAt }),
	wire.String(4, func(h *Header) *string { return &h.Node }),
	wire.String(5, func(h *Header) *string { return &h.Version }),
	wire.Bytes(6, func(h *Header) *[]byte { return &h.Settings }),
)

// metaWire is Meta as written: each command a message of its own.
type metaWire struct {
	NextID        uint64
	Keys, Blocked []blob
}

// blob is one command's encoding.
type blob struct{ b []byte }

var blobCodec = wire.NewCodec(nil, wire.Bytes(1, func(b *blob) *[]byte { return &b.b }))

var metaCodec = wire.NewCodec(nil,
	wire.Uint(1, func(m *metaWire) *uint64 { return &m.NextID }),
	wire.Messages(2, blobCodec, func(m *metaWire) *[]blob { return &m.Keys }),
	wire.Messages(3, blobCodec, func(m *metaWire) *[]blob { return &m.Blocked }),
)

func blobs(bs [][]byte) []blob {
	out := make([]blob, len(bs))
	for i, b := range bs {
		out[i] = blob{b}
	}
	return out
}

func unblobs(bs []blob) [][]byte {
	out := make([][]byte, len(bs))
	for i, b := range bs {
		out[i] = b.b
	}
	return out
}

var recordCodec = wire.NewCodec(nil,
	wire.String(1, func(r *Record) *string { return &r.Code }),
	wire.Bytes(2, func(r *Record) *[]byte { return &r.Link }),
	wire.Bytes(3, func(r *Record) *[]byte { return &r.Clicks }),
)

var recordsCodec = wire.NewCodec(nil,
	wire.Uint(1, func(r *records) *uint32 { return &r.Shard }),
	wire.Messages(2, recordCodec, func(r *records) *[]Record { return &r.Records }),
)

var shardCountCodec = wire.NewCodec(nil,
	wire.Uint(1, func(s *ShardCount) *uint32 { return &s.Shard }),
	wire.Uint(2, func(s *ShardCount) *uint64 { return &s.Records }),
	wire.Uint(3, func(s *ShardCount) *uint64 { return &s.ReadAt }),
)

var manifestCodec = wire.NewCodec(nil,
	wire.Messages(1, shardCountCodec, func(m *Manifest) *[]ShardCount { return &m.Shards }),
	wire.Uint(2, func(m *Manifest) *uint64 { return &m.Keys }),
	wire.Uint(3, func(m *Manifest) *uint64 { return &m.Blocked }),
	wire.Bytes(4, func(m *Manifest) *[]byte { return &m.SHA256 }),
	wire.Uint(5, func(m *Manifest) *uint64 { return &m.NextID }),
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Writer writes a backup. Its methods are called in the file's order:
// NewWriter (the header), Meta, Records for each shard, Close.
type Writer struct {
	w        *bufio.Writer
	sum      hash.Hash
	manifest Manifest
	pending  records
	size     int
	err      error
}

// NewWriter writes the magic line and h to w (h.Format is set).
func NewWriter(w io.Writer, h Header) (*Writer, error) {
	bw := &Writer{w: bufio.NewWriterSize(w, 64<<10), sum: sha256.New()}
	bw.write([]byte(Magic))
	h.Format = Format
	bw.frame(kindHeader, headerCodec.Append(nil, &h))
	return bw, bw.err
}

// Meta writes the meta group's part.
func (w *Writer) Meta(m Meta) error {
	w.manifest.Keys, w.manifest.Blocked = uint64(len(m.Keys)), uint64(len(m.Blocked))
	w.frame(kindMeta, metaCodec.Append(nil, &metaWire{NextID: m.NextID, Keys: blobs(m.Keys), Blocked: blobs(m.Blocked)}))
	return w.err
}

// BeginShard starts shard's records, read at Raft index readAt.
func (w *Writer) BeginShard(shard uint32, readAt uint64) error {
	w.flush()
	w.manifest.Shards = append(w.manifest.Shards, ShardCount{Shard: shard, ReadAt: readAt})
	w.pending = records{Shard: shard}
	return w.err
}

// Record adds one record to the shard begun last.
func (w *Writer) Record(r Record) error {
	if len(w.manifest.Shards) == 0 {
		return errors.New("backup: a record before BeginShard")
	}
	w.pending.Records = append(w.pending.Records, r)
	w.manifest.Shards[len(w.manifest.Shards)-1].Records++
	if w.size += len(r.Code) + len(r.Link) + len(r.Clicks) + 16; w.size >= recordBudget {
		w.flush()
	}
	return w.err
}

// flush writes the pending records as one frame.
func (w *Writer) flush() {
	if len(w.pending.Records) > 0 {
		w.frame(kindRecords, recordsCodec.Append(nil, &w.pending))
	}
	w.pending.Records, w.size = w.pending.Records[:0], 0
}

// Close writes the manifest and flushes. It does not close the
// underlying writer.
func (w *Writer) Close() error {
	w.flush()
	w.manifest.SHA256 = w.sum.Sum(nil)
	w.frame(kindManifest, manifestCodec.Append(nil, &w.manifest))
	if w.err == nil {
		w.err = w.w.Flush()
	}
	return w.err
}

// SetNextID records in the manifest the next free ID read after the
// records (before Close).
func (w *Writer) SetNextID(next uint64) { w.manifest.NextID = next }

// Manifest returns what Close wrote (after Close).
func (w *Writer) Manifest() Manifest { return w.manifest }

func (w *Writer) frame(kind byte, body []byte) {
	if w.err == nil && len(body) > MaxFrame {
		w.err = fmt.Errorf("backup: a frame of %d bytes (a record over %d bytes?)", len(body), MaxFrame)
	}
	w.write(appendFrame(nil, kind, body))
}

// appendFrame appends the frame of kind and body to b.
func appendFrame(b []byte, kind byte, body []byte) []byte {
	start := len(b)
	b = append(b, kind)
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	b = append(b, body...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

func (w *Writer) write(b []byte) {
	if w.err != nil {
		return
	}
	if _, err := w.w.Write(b); err != nil {
		w.err = err
		return
	}
	w.sum.Write(b)
}

// Visitor receives a backup's parts as Read checks them; a nil function
// skips its part. An error it returns ends Read with that error.
type Visitor struct {
	Header  func(*Header) error
	Meta    func(*Meta) error
	Records func(shard uint32, rs []Record) error
}

// Read reads and checks a whole backup from r, handing its parts to v in
// order, and returns its header and manifest. The parts v saw come before
// a failure is known: a caller that must not act on a bad file reads it
// once with an empty Visitor first.
func Read(r io.Reader, v Visitor) (*Header, *Manifest, error) {
	rd := &reader{r: bufio.NewReaderSize(r, 64<<10), sum: sha256.New()}
	magic := make([]byte, len(Magic))
	if _, err := io.ReadFull(rd, magic); err != nil || string(magic) != Magic {
		return nil, nil, fmt.Errorf("%w: it does not begin with %q", ErrNotBackup, Magic[:len(Magic)-1])
	}
	var (
		h             *Header
		sawMeta       bool
		counts        []ShardCount
		keys, blocked uint64
	)
	for {
		at := rd.n
		digest := rd.sum.Sum(nil)
		kind, body, err := rd.frame()
		if err != nil {
			return h, nil, err
		}
		if h == nil && kind != kindHeader {
			return nil, nil, fmt.Errorf("%w: byte %d: the first frame is not the header", ErrDamaged, at)
		}
		switch kind {
		case kindHeader:
			if h != nil {
				return h, nil, fmt.Errorf("%w: byte %d: a second header", ErrDamaged, at)
			}
			if h, err = headerCodec.Decode(body); err != nil {
				return nil, nil, fmt.Errorf("%w: byte %d: header: %v", ErrDamaged, at, err)
			}
			if h.Format > Format {
				return h, nil, fmt.Errorf("%w: format %d (this version reads up to %d)", ErrNewerFormat, h.Format, Format)
			}
			if v.Header != nil {
				if err := v.Header(h); err != nil {
					return h, nil, err
				}
			}
		case kindMeta:
			if sawMeta || len(counts) > 0 {
				return h, nil, fmt.Errorf("%w: byte %d: the meta part out of place", ErrDamaged, at)
			}
			sawMeta = true
			mw, err := metaCodec.Decode(body)
			if err != nil {
				return h, nil, fmt.Errorf("%w: byte %d: meta: %v", ErrDamaged, at, err)
			}
			keys, blocked = uint64(len(mw.Keys)), uint64(len(mw.Blocked))
			if v.Meta != nil {
				if err := v.Meta(&Meta{NextID: mw.NextID, Keys: unblobs(mw.Keys), Blocked: unblobs(mw.Blocked)}); err != nil {
					return h, nil, err
				}
			}
		case kindRecords:
			rs, err := recordsCodec.Decode(body)
			if err != nil {
				return h, nil, fmt.Errorf("%w: byte %d: records: %v", ErrDamaged, at, err)
			}
			if n := len(counts); n == 0 || counts[n-1].Shard != rs.Shard {
				counts = append(counts, ShardCount{Shard: rs.Shard})
			}
			counts[len(counts)-1].Records += uint64(len(rs.Records))
			if v.Records != nil {
				if err := v.Records(rs.Shard, rs.Records); err != nil {
					return h, nil, err
				}
			}
		case kindManifest:
			m, err := manifestCodec.Decode(body)
			if err != nil {
				return h, nil, fmt.Errorf("%w: byte %d: manifest: %v", ErrDamaged, at, err)
			}
			if err := m.check(digest, counts, keys, blocked, sawMeta); err != nil {
				return h, m, fmt.Errorf("%w: %v", ErrDamaged, err)
			}
			if n, _ := rd.r.Read(make([]byte, 1)); n > 0 {
				return h, m, fmt.Errorf("%w: bytes after the manifest (at byte %d)", ErrDamaged, rd.n)
			}
			return h, m, nil
		default:
			return h, nil, fmt.Errorf("%w: byte %d: a frame of unknown kind %d", ErrDamaged, at, kind)
		}
	}
}

// check compares m with what the reader saw before it.
func (m *Manifest) check(digest []byte, seen []ShardCount, keys, blocked uint64, sawMeta bool) error {
	if string(m.SHA256) != string(digest) {
		return errors.New("the SHA-256 of the file does not match its manifest")
	}
	if !sawMeta {
		return errors.New("no meta part")
	}
	if m.Keys != keys || m.Blocked != blocked {
		return fmt.Errorf("the manifest counts %d keys and %d blocked domains, the file holds %d and %d", m.Keys, m.Blocked, keys, blocked)
	}
	got := map[uint32]uint64{}
	for _, s := range seen {
		got[s.Shard] += s.Records
	}
	for _, s := range m.Shards {
		if got[s.Shard] != s.Records {
			return fmt.Errorf("the manifest counts %d records in shard %d, the file holds %d", s.Records, s.Shard, got[s.Shard])
		}
		delete(got, s.Shard)
	}
	for s, n := range got {
		if n > 0 {
			return fmt.Errorf("%d records of shard %d the manifest does not list", n, s)
		}
	}
	return nil
}

// reader counts and digests what it reads.
type reader struct {
	r   *bufio.Reader
	sum hash.Hash
	n   int64
}

func (r *reader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.sum.Write(p[:n])
	r.n += int64(n)
	return n, err
}

// frame reads one frame and checks its CRC.
func (r *reader) frame() (byte, []byte, error) {
	at := r.n
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, nil, r.short(at, err)
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n > MaxFrame {
		return 0, nil, fmt.Errorf("%w: byte %d: a frame of %d bytes (at most %d)", ErrDamaged, at, n, MaxFrame)
	}
	body := make([]byte, n+4)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, nil, r.short(at, err)
	}
	body, tail := body[:n], body[n:]
	crc := crc32.Update(crc32.Update(0, castagnoli, head[:]), castagnoli, body)
	if binary.BigEndian.Uint32(tail) != crc {
		return 0, nil, fmt.Errorf("%w: byte %d: the frame's checksum does not match", ErrDamaged, at)
	}
	return head[0], body, nil
}

// short is the error of a read that ended early.
func (r *reader) short(at int64, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: it ends at byte %d, in or before the frame at byte %d, without its manifest", ErrTruncated, r.n, at)
	}
	return err
}

// ErrNotEmpty is returned by a restore into a cluster that holds links.
var ErrNotEmpty = errors.New("the cluster holds links")

// Report is what a restore did.
type Report struct {
	// Source and Manifest are the backup's.
	Source   Header
	Manifest Manifest
	// Links counts the records put by this restore (in a fresh cluster,
	// also those an entry proposed again found put by its lost first
	// attempt); Present, in a restore resumed, those found there already
	// as the backup holds them.
	Links, Present int
	// ConflictCount counts the codes held by another link, which were
	// left alone; Conflicts names the first of them.
	ConflictCount int
	Conflicts     []string
	// Keys and Blocked count the keys and blocked domains added.
	Keys, Blocked int
	// NextID is the first ID a lease gives out from now on.
	NextID uint64
}
