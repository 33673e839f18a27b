package fsm

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/linkraft/linkraft/link"
)

// CommandType is the first byte of every Raft entry. Values are append-only.
type CommandType uint8

// Command types. 0 is reserved so that a zeroed entry is never valid.
const (
	TypeCreateIfAbsent CommandType = 1
	TypeUpdate         CommandType = 2
	TypeDelete         CommandType = 3
	TypeConsumeVisit   CommandType = 5
	TypeCreateBatch    CommandType = 6

	TypeSetSettings  CommandType = 32
	TypeLeaseRange   CommandType = 33
	TypeSetPlacement CommandType = 34

	// IgnoreUnknownFlag marks a type that a replica which does not know it
	// may skip instead of panicking (for commands that only add optional
	// state).
	IgnoreUnknownFlag CommandType = 0x80
)

// ErrDecode is wrapped by every decoding failure.
var ErrDecode = errors.New("fsm: cannot decode")

// CreateIfAbsent creates a link under Code unless the code is in use, by a
// live link or a tombstone.
type CreateIfAbsent struct {
	Code      string
	URL       string
	Owner     string
	Now       time.Time
	ExpiresAt time.Time
	Redirect  int
	MaxVisits uint64
	Tags      []string
	// Nonce makes a retried create idempotent: if the code already holds a
	// live link with the same non-zero nonce, that link is returned.
	Nonce uint64
}

// UpdateMask says which fields an Update sets.
type UpdateMask uint32

// Fields an Update may set.
const (
	SetURL UpdateMask = 1 << iota
	SetExpiresAt
	SetRedirect
	SetDisabled
	SetTags
)

// Update changes the fields named by Set of a live link.
type Update struct {
	Code      string
	Now       time.Time
	Set       UpdateMask
	URL       string
	ExpiresAt time.Time // zero clears the expiry
	Redirect  int
	Disabled  bool
	Tags      []string
}

// Delete turns a live link into a tombstone.
type Delete struct {
	Code string
	Now  time.Time
}

// Settings are the cluster-wide parameters fixed at bootstrap and held by the
// meta group.
type Settings struct {
	ClusterID         string
	Shards            uint32
	PartitionCount    uint32
	ReplicationFactor uint32
	Load              float64
	CodeMode          string
	CodeKey           []byte
	CreatedAt         time.Time
	// RingVNodes and RingHasher complete the ring parameters (virtual
	// nodes per shard, hash function name).
	RingVNodes uint32
	RingHasher string
}

// SetSettings stores the cluster settings if none are stored yet.
type SetSettings struct {
	Settings Settings
}

// LeaseRange leases N consecutive IDs to Node.
type LeaseRange struct {
	Node string
	N    uint64
}

// Placement says which nodes host each shard. Version counts changes;
// SetPlacement is a compare-and-set on it.
type Placement struct {
	Version uint64
	// Shards[i] lists the node IDs hosting shard i.
	Shards [][]string
	// Removed lists nodes an operator removed: they are never added back
	// (a removed node rejoins only with a new ID and an empty data dir).
	Removed []string
}

// SetPlacement stores Placement if its Version is the stored version + 1
// (1 for the first placement).
type SetPlacement struct {
	Placement Placement
}

// MaxLease bounds one LeaseRange.
const MaxLease = 1 << 24

// field numbers shared by link records and commands
const (
	fCode      = 1
	fURL       = 2
	fOwner     = 3
	fCreated   = 4 // "now" in commands
	fUpdated   = 5
	fExpires   = 6
	fRedirect  = 7
	fDisabled  = 8
	fDeleted   = 9
	fMaxVisits = 10
	fTag       = 11
	fNonce     = 12
	fVersion   = 13
	fVisits    = 14
	fMask      = 20

	fSetCluster   = 1
	fSetShards    = 2
	fSetParts     = 3
	fSetRF        = 4
	fSetLoad      = 5
	fSetCodeMode  = 6
	fSetCodeKey   = 7
	fSetCreatedAt = 8
	fSetVNodes    = 9
	fSetHasher    = 10

	fLeaseNode = 1
	fLeaseN    = 2

	fPlaceVersion = 1
	fPlaceShard   = 2
	fPlaceRemoved = 3
)

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendUint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendBool(b []byte, num protowire.Number, v bool) []byte {
	if !v {
		return b
	}
	return appendUint(b, num, 1)
}

// appendTime stores unix nanoseconds; the zero time is omitted.
func appendTime(b []byte, num protowire.Number, t time.Time) []byte {
	if t.IsZero() {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, protowire.EncodeZigZag(t.UnixNano()))
}

func appendFloat(b []byte, num protowire.Number, f float64) []byte {
	if f == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, math.Float64bits(f))
}

// fieldReader walks the fields of a protowire body.
type fieldReader struct {
	b   []byte
	err error
}

// next returns the next field number and type; ok is false at the end or on
// error (check r.err).
func (r *fieldReader) next() (protowire.Number, protowire.Type, bool) {
	if r.err != nil || len(r.b) == 0 {
		return 0, 0, false
	}
	num, typ, n := protowire.ConsumeTag(r.b)
	if n < 0 {
		r.err = fmt.Errorf("%w: %v", ErrDecode, protowire.ParseError(n))
		return 0, 0, false
	}
	r.b = r.b[n:]
	return num, typ, true
}

// each calls fn for every field until the body ends or a read fails, and
// returns the first failure; fn reads the field (r.str, r.uint, …) or skips
// it.
func (r *fieldReader) each(fn func(num protowire.Number, typ protowire.Type)) error {
	for {
		num, typ, ok := r.next()
		if !ok {
			return r.err
		}
		fn(num, typ)
	}
}

// setErr stops the walk with err (a field that read well but is invalid),
// unless it already failed.
func (r *fieldReader) setErr(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *fieldReader) fail(n int) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %v", ErrDecode, protowire.ParseError(n))
	}
}

func (r *fieldReader) want(got, want protowire.Type, num protowire.Number) bool {
	if got != want {
		if r.err == nil {
			r.err = fmt.Errorf("%w: field %d has wire type %d, want %d", ErrDecode, num, got, want)
		}
		return false
	}
	return true
}

func (r *fieldReader) bytes(typ protowire.Type, num protowire.Number) []byte {
	if !r.want(typ, protowire.BytesType, num) {
		return nil
	}
	v, n := protowire.ConsumeBytes(r.b)
	if n < 0 {
		r.fail(n)
		return nil
	}
	r.b = r.b[n:]
	return v
}

func (r *fieldReader) str(typ protowire.Type, num protowire.Number) string {
	return string(r.bytes(typ, num))
}

func (r *fieldReader) uint(typ protowire.Type, num protowire.Number) uint64 {
	if !r.want(typ, protowire.VarintType, num) {
		return 0
	}
	v, n := protowire.ConsumeVarint(r.b)
	if n < 0 {
		r.fail(n)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *fieldReader) time(typ protowire.Type, num protowire.Number) time.Time {
	v := r.uint(typ, num)
	if r.err != nil {
		return time.Time{}
	}
	return time.Unix(0, protowire.DecodeZigZag(v)).UTC()
}

func (r *fieldReader) float(typ protowire.Type, num protowire.Number) float64 {
	if !r.want(typ, protowire.Fixed64Type, num) {
		return 0
	}
	v, n := protowire.ConsumeFixed64(r.b)
	if n < 0 {
		r.fail(n)
		return 0
	}
	r.b = r.b[n:]
	return math.Float64frombits(v)
}

// skip consumes a field this version does not know (forward compatibility).
func (r *fieldReader) skip(num protowire.Number, typ protowire.Type) {
	n := protowire.ConsumeFieldValue(num, typ, r.b)
	if n < 0 {
		r.fail(n)
		return
	}
	r.b = r.b[n:]
}

func smallInt(v uint64) int {
	if v > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(v)
}

// Encode returns the Raft entry for c.
func (c *CreateIfAbsent) Encode() []byte {
	b := make([]byte, 0, 64+len(c.URL))
	b = append(b, byte(TypeCreateIfAbsent))
	return c.appendBody(b)
}

// EncodedSize is the length of c's encoding inside a CreateBatch entry
// (give or take a few bytes of framing).
func (c *CreateIfAbsent) EncodedSize() int { return len(c.appendBody(nil)) + 4 }

func (c *CreateIfAbsent) appendBody(b []byte) []byte {
	b = appendString(b, fCode, c.Code)
	b = appendString(b, fURL, c.URL)
	b = appendString(b, fOwner, c.Owner)
	b = appendTime(b, fCreated, c.Now)
	b = appendTime(b, fExpires, c.ExpiresAt)
	b = appendUint(b, fRedirect, uint64(c.Redirect))
	b = appendUint(b, fMaxVisits, c.MaxVisits)
	for _, t := range c.Tags {
		b = protowire.AppendTag(b, fTag, protowire.BytesType)
		b = protowire.AppendString(b, t)
	}
	b = appendUint(b, fNonce, c.Nonce)
	return b
}

func decodeCreate(body []byte) (*CreateIfAbsent, error) {
	c := &CreateIfAbsent{}
	r := fieldReader{b: body}
	if err := r.each(func(num protowire.Number, typ protowire.Type) {
		switch num {
		case fCode:
			c.Code = r.str(typ, num)
		case fURL:
			c.URL = r.str(typ, num)
		case fOwner:
			c.Owner = r.str(typ, num)
		case fCreated:
			c.Now = r.time(typ, num)
		case fExpires:
			c.ExpiresAt = r.time(typ, num)
		case fRedirect:
			c.Redirect = smallInt(r.uint(typ, num))
		case fMaxVisits:
			c.MaxVisits = r.uint(typ, num)
		case fTag:
			c.Tags = append(c.Tags, r.str(typ, num))
		case fNonce:
			c.Nonce = r.uint(typ, num)
		default:
			r.skip(num, typ)
		}
	}); err != nil {
		return nil, err
	}
	if c.Code == "" {
		return nil, fmt.Errorf("%w: create without a code", ErrDecode)
	}
	return c, nil
}

// Encode returns the Raft entry for u.
func (u *Update) Encode() []byte {
	b := make([]byte, 0, 64+len(u.URL))
	b = append(b, byte(TypeUpdate))
	b = appendString(b, fCode, u.Code)
	b = appendTime(b, fCreated, u.Now)
	b = appendUint(b, fMask, uint64(u.Set))
	b = appendString(b, fURL, u.URL)
	b = appendTime(b, fExpires, u.ExpiresAt)
	b = appendUint(b, fRedirect, uint64(u.Redirect))
	b = appendBool(b, fDisabled, u.Disabled)
	for _, t := range u.Tags {
		b = protowire.AppendTag(b, fTag, protowire.BytesType)
		b = protowire.AppendString(b, t)
	}
	return b
}

func decodeUpdate(body []byte) (*Update, error) {
	u := &Update{}
	r := fieldReader{b: body}
	if err := r.each(func(num protowire.Number, typ protowire.Type) {
		switch num {
		case fCode:
			u.Code = r.str(typ, num)
		case fCreated:
			u.Now = r.time(typ, num)
		case fMask:
			u.Set = UpdateMask(r.uint(typ, num))
		case fURL:
			u.URL = r.str(typ, num)
		case fExpires:
			u.ExpiresAt = r.time(typ, num)
		case fRedirect:
			u.Redirect = smallInt(r.uint(typ, num))
		case fDisabled:
			u.Disabled = r.uint(typ, num) != 0
		case fTag:
			u.Tags = append(u.Tags, r.str(typ, num))
		default:
			r.skip(num, typ)
		}
	}); err != nil {
		return nil, err
	}
	if u.Code == "" {
		return nil, fmt.Errorf("%w: update without a code", ErrDecode)
	}
	return u, nil
}

// Encode returns the Raft entry for d.
func (d *Delete) Encode() []byte {
	b := make([]byte, 0, 32)
	b = append(b, byte(TypeDelete))
	b = appendString(b, fCode, d.Code)
	b = appendTime(b, fCreated, d.Now)
	return b
}

func decodeDelete(body []byte) (*Delete, error) {
	d := &Delete{}
	r := fieldReader{b: body}
	if err := r.each(func(num protowire.Number, typ protowire.Type) {
		switch num {
		case fCode:
			d.Code = r.str(typ, num)
		case fCreated:
			d.Now = r.time(typ, num)
		default:
			r.skip(num, typ)
		}
	}); err != nil {
		return nil, err
	}
	if d.Code == "" {
		return nil, fmt.Errorf("%w: delete without a code", ErrDecode)
	}
	return d, nil
}

func appendSettings(b []byte, s *Settings) []byte {
	b = appendString(b, fSetCluster, s.ClusterID)
	b = appendUint(b, fSetShards, uint64(s.Shards))
	b = appendUint(b, fSetParts, uint64(s.PartitionCount))
	b = appendUint(b, fSetRF, uint64(s.ReplicationFactor))
	b = appendFloat(b, fSetLoad, s.Load)
	b = appendString(b, fSetCodeMode, s.CodeMode)
	b = appendBytes(b, fSetCodeKey, s.CodeKey)
	b = appendTime(b, fSetCreatedAt, s.CreatedAt)
	b = appendUint(b, fSetVNodes, uint64(s.RingVNodes))
	b = appendString(b, fSetHasher, s.RingHasher)
	return b
}

func decodeSettings(body []byte) (*Settings, error) {
	s := &Settings{}
	r := fieldReader{b: body}
	if err := r.each(func(num protowire.Number, typ protowire.Type) {
		switch num {
		case fSetCluster:
			s.ClusterID = r.str(typ, num)
		case fSetShards:
			s.Shards = uint32(r.uint(typ, num))
		case fSetParts:
			s.PartitionCount = uint32(r.uint(typ, num))
		case fSetRF:
			s.ReplicationFactor = uint32(r.uint(typ, num))
		case fSetLoad:
			s.Load = r.float(typ, num)
			if math.IsNaN(s.Load) || math.IsInf(s.Load, 0) {
				r.setErr(fmt.Errorf("%w: load factor %v", ErrDecode, s.Load))
				return
			}
		case fSetCodeMode:
			s.CodeMode = r.str(typ, num)
		case fSetCodeKey:
			s.CodeKey = append([]byte(nil), r.bytes(typ, num)...)
		case fSetCreatedAt:
			s.CreatedAt = r.time(typ, num)
		case fSetVNodes:
			s.RingVNodes = uint32(r.uint(typ, num))
		case fSetHasher:
			s.RingHasher = r.str(typ, num)
		default:
			r.skip(num, typ)
		}
	}); err != nil {
		return nil, err
	}
	return s, nil
}

// Encode returns the Raft entry for s.
func (s *SetSettings) Encode() []byte {
	return appendSettings([]byte{byte(TypeSetSettings)}, &s.Settings)
}

// Encode returns the Raft entry for l.
func (l *LeaseRange) Encode() []byte {
	b := []byte{byte(TypeLeaseRange)}
	b = appendString(b, fLeaseNode, l.Node)
	b = appendUint(b, fLeaseN, l.N)
	return b
}

func decodeLease(body []byte) (*LeaseRange, error) {
	l := &LeaseRange{}
	r := fieldReader{b: body}
	if err := r.each(func(num protowire.Number, typ protowire.Type) {
		switch num {
		case fLeaseNode:
			l.Node = r.str(typ, num)
		case fLeaseN:
			l.N = r.uint(typ, num)
		default:
			r.skip(num, typ)
		}
	}); err != nil {
		return nil, err
	}
	return l, nil
}

func appendPlacement(b []byte, p *Placement) []byte {
	b = appendUint(b, fPlaceVersion, p.Version)
	for _, nodes := range p.Shards {
		b = protowire.AppendTag(b, fPlaceShard, protowire.BytesType)
		b = protowire.AppendString(b, strings.Join(nodes, ","))
	}
	for _, id := range p.Removed {
		b = protowire.AppendTag(b, fPlaceRemoved, protowire.BytesType)
		b = protowire.AppendString(b, id)
	}
	return b
}

func decodePlacement(body []byte) (*Placement, error) {
	p := &Placement{}
	r := fieldReader{b: body}
	if err := r.each(func(num protowire.Number, typ protowire.Type) {
		switch num {
		case fPlaceVersion:
			p.Version = r.uint(typ, num)
		case fPlaceShard:
			var nodes []string
			if s := r.str(typ, num); s != "" {
				nodes = strings.Split(s, ",")
			}
			p.Shards = append(p.Shards, nodes)
		case fPlaceRemoved:
			p.Removed = append(p.Removed, r.str(typ, num))
		default:
			r.skip(num, typ)
		}
	}); err != nil {
		return nil, err
	}
	return p, nil
}

// Encode returns the Raft entry for s.
func (s *SetPlacement) Encode() []byte {
	return appendPlacement([]byte{byte(TypeSetPlacement)}, &s.Placement)
}

// encodeLink is the wire form of a link (RPC answers): every field.
func encodeLink(l *link.Link) []byte { return appendLink(make([]byte, 0, 80+len(l.URL)), l, false) }

// encodeStoredLink is the form kept in the shard's bbolt file, under the
// code as key: what the key or a default already says is left out (the
// code, an UpdatedAt equal to CreatedAt, the default redirect), about 20 of
// ~110 bytes for a 60-byte URL. decodeStoredLink puts them back.
func encodeStoredLink(l *link.Link) []byte {
	return appendLink(make([]byte, 0, 64+len(l.URL)), l, true)
}

// decodeStoredLink parses a value of the links bucket stored under key;
// values written before encodeStoredLink existed decode the same.
func decodeStoredLink(key, v []byte) (*link.Link, error) {
	l, err := decodeLink(v)
	if err != nil {
		return nil, err
	}
	if l.Code == "" {
		l.Code = string(key)
	}
	if l.UpdatedAt.IsZero() {
		l.UpdatedAt = l.CreatedAt
	}
	if l.Redirect == 0 {
		l.Redirect = link.DefaultRedirect
	}
	return l, nil
}

func appendLink(b []byte, l *link.Link, stored bool) []byte {
	if !stored {
		b = appendString(b, fCode, l.Code)
	}
	b = appendString(b, fURL, l.URL)
	b = appendString(b, fOwner, l.Owner)
	b = appendTime(b, fCreated, l.CreatedAt)
	if !stored || !l.UpdatedAt.Equal(l.CreatedAt) {
		b = appendTime(b, fUpdated, l.UpdatedAt)
	}
	b = appendTime(b, fExpires, l.ExpiresAt)
	if !stored || l.Redirect != link.DefaultRedirect {
		b = appendUint(b, fRedirect, uint64(l.Redirect))
	}
	b = appendBool(b, fDisabled, l.Disabled)
	b = appendBool(b, fDeleted, l.Deleted)
	b = appendUint(b, fMaxVisits, l.MaxVisits)
	for _, t := range l.Tags {
		b = protowire.AppendTag(b, fTag, protowire.BytesType)
		b = protowire.AppendString(b, t)
	}
	b = appendUint(b, fNonce, l.Nonce)
	b = appendUint(b, fVersion, l.Version)
	b = appendUint(b, fVisits, l.Visits)
	return b
}

func decodeLink(b []byte) (*link.Link, error) {
	l := &link.Link{}
	r := fieldReader{b: b}
	if err := r.each(func(num protowire.Number, typ protowire.Type) {
		switch num {
		case fCode:
			l.Code = r.str(typ, num)
		case fURL:
			l.URL = r.str(typ, num)
		case fOwner:
			l.Owner = r.str(typ, num)
		case fCreated:
			l.CreatedAt = r.time(typ, num)
		case fUpdated:
			l.UpdatedAt = r.time(typ, num)
		case fExpires:
			l.ExpiresAt = r.time(typ, num)
		case fRedirect:
			l.Redirect = smallInt(r.uint(typ, num))
		case fDisabled:
			l.Disabled = r.uint(typ, num) != 0
		case fDeleted:
			l.Deleted = r.uint(typ, num) != 0
		case fMaxVisits:
			l.MaxVisits = r.uint(typ, num)
		case fTag:
			l.Tags = append(l.Tags, r.str(typ, num))
		case fNonce:
			l.Nonce = r.uint(typ, num)
		case fVersion:
			l.Version = r.uint(typ, num)
		case fVisits:
			l.Visits = r.uint(typ, num)
		default:
			r.skip(num, typ)
		}
	}); err != nil {
		return nil, err
	}
	return l, nil
}

// Decode parses a Raft entry into its command struct (*CreateIfAbsent,
// *Update, *SetSettings, ...) without validating it (Check does).
func Decode(data []byte) (any, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("%w: empty entry", ErrDecode)
	}
	body := data[1:]
	switch CommandType(data[0]) {
	case TypeCreateIfAbsent:
		return decodeCreate(body)
	case TypeUpdate:
		return decodeUpdate(body)
	case TypeDelete:
		return decodeDelete(body)
	case TypeSetSettings:
		s, err := decodeSettings(body)
		if err != nil {
			return nil, err
		}
		return &SetSettings{Settings: *s}, nil
	case TypeLeaseRange:
		return decodeLease(body)
	case TypeClickBatch:
		return decodeClickBatch(body)
	case TypeConsumeVisit:
		return decodeConsumeVisit(body)
	case TypeCreateBatch:
		return decodeCreateBatch(body)
	case TypeSetPlacement:
		p, err := decodePlacement(body)
		if err != nil {
			return nil, err
		}
		return &SetPlacement{Placement: *p}, nil
	case TypeRegisterNode:
		return decodeRegisterNode(body)
	case TypeCreateKey:
		return decodeCreateKey(body)
	case TypeRevokeKey:
		return decodeRevokeKey(body)
	case TypeSetBlocked:
		return decodeSetBlocked(body)
	}
	return nil, fmt.Errorf("%w: unknown command type %d", ErrDecode, data[0])
}

// EncodeLink returns the stored (and wire) form of a link.
func EncodeLink(l *link.Link) []byte { return encodeLink(l) }

// DecodeLink parses what EncodeLink returned.
func DecodeLink(b []byte) (*link.Link, error) { return decodeLink(b) }

// ConsumeVisit takes one visit of a link with a visit limit: it succeeds
// (and counts the visit) while visits remain, and fails with link.ErrGone
// once MaxVisits have been granted. Going through Raft makes the limit exact
// across the cluster: exactly MaxVisits consumptions ever succeed.
type ConsumeVisit struct {
	Code string
	// Nonce makes a retry after an unknown outcome idempotent: a visit
	// already granted under this nonce is granted again, not counted again.
	Nonce uint64
}

// Encode returns the Raft entry for c.
func (c *ConsumeVisit) Encode() []byte {
	b := appendString([]byte{byte(TypeConsumeVisit)}, fCode, c.Code)
	return appendUint(b, fNonce, c.Nonce)
}

func decodeConsumeVisit(body []byte) (*ConsumeVisit, error) {
	c := &ConsumeVisit{}
	r := fieldReader{b: body}
	if err := r.each(func(num protowire.Number, typ protowire.Type) {
		switch num {
		case fCode:
			c.Code = r.str(typ, num)
		case fNonce:
			c.Nonce = r.uint(typ, num)
		default:
			r.skip(num, typ)
		}
	}); err != nil {
		return nil, err
	}
	if c.Code == "" {
		return nil, fmt.Errorf("%w: consume-visit without a code", ErrDecode)
	}
	return c, nil
}
