package fsm

import (
	"errors"
	"fmt"
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

var createCodec = newCodec(func(c *CreateIfAbsent) error { return needCode("create", c.Code) },
	strField(fCode, func(c *CreateIfAbsent) *string { return &c.Code }),
	strField(fURL, func(c *CreateIfAbsent) *string { return &c.URL }),
	strField(fOwner, func(c *CreateIfAbsent) *string { return &c.Owner }),
	timeField(fCreated, func(c *CreateIfAbsent) *time.Time { return &c.Now }),
	timeField(fExpires, func(c *CreateIfAbsent) *time.Time { return &c.ExpiresAt }),
	intField(fRedirect, func(c *CreateIfAbsent) *int { return &c.Redirect }),
	uintField(fMaxVisits, func(c *CreateIfAbsent) *uint64 { return &c.MaxVisits }),
	stringsField(fTag, func(c *CreateIfAbsent) *[]string { return &c.Tags }),
	uintField(fNonce, func(c *CreateIfAbsent) *uint64 { return &c.Nonce }),
)

// Encode returns the Raft entry for c.
func (c *CreateIfAbsent) Encode() []byte {
	return createCodec.append(append(make([]byte, 0, 64+len(c.URL)), byte(TypeCreateIfAbsent)), c)
}

// EncodedSize is the length of c's encoding inside a CreateBatch entry
// (give or take a few bytes of framing).
func (c *CreateIfAbsent) EncodedSize() int { return len(createCodec.append(nil, c)) + 4 }

func decodeCreate(body []byte) (*CreateIfAbsent, error) { return createCodec.decode(body) }

var updateCodec = newCodec(func(u *Update) error { return needCode("update", u.Code) },
	strField(fCode, func(u *Update) *string { return &u.Code }),
	timeField(fCreated, func(u *Update) *time.Time { return &u.Now }),
	uintField(fMask, func(u *Update) *UpdateMask { return &u.Set }),
	strField(fURL, func(u *Update) *string { return &u.URL }),
	timeField(fExpires, func(u *Update) *time.Time { return &u.ExpiresAt }),
	intField(fRedirect, func(u *Update) *int { return &u.Redirect }),
	boolField(fDisabled, func(u *Update) *bool { return &u.Disabled }),
	stringsField(fTag, func(u *Update) *[]string { return &u.Tags }),
)

// Encode returns the Raft entry for u.
func (u *Update) Encode() []byte {
	return updateCodec.append(append(make([]byte, 0, 64+len(u.URL)), byte(TypeUpdate)), u)
}

func decodeUpdate(body []byte) (*Update, error) { return updateCodec.decode(body) }

var deleteCodec = newCodec(func(d *Delete) error { return needCode("delete", d.Code) },
	strField(fCode, func(d *Delete) *string { return &d.Code }),
	timeField(fCreated, func(d *Delete) *time.Time { return &d.Now }),
)

// Encode returns the Raft entry for d.
func (d *Delete) Encode() []byte { return deleteCodec.append([]byte{byte(TypeDelete)}, d) }

func decodeDelete(body []byte) (*Delete, error) { return deleteCodec.decode(body) }

var settingsCodec = newCodec[Settings](nil,
	strField(fSetCluster, func(s *Settings) *string { return &s.ClusterID }),
	uintField(fSetShards, func(s *Settings) *uint32 { return &s.Shards }),
	uintField(fSetParts, func(s *Settings) *uint32 { return &s.PartitionCount }),
	uintField(fSetRF, func(s *Settings) *uint32 { return &s.ReplicationFactor }),
	floatField(fSetLoad, func(s *Settings) *float64 { return &s.Load }),
	strField(fSetCodeMode, func(s *Settings) *string { return &s.CodeMode }),
	bytesField(fSetCodeKey, func(s *Settings) *[]byte { return &s.CodeKey }),
	timeField(fSetCreatedAt, func(s *Settings) *time.Time { return &s.CreatedAt }),
	uintField(fSetVNodes, func(s *Settings) *uint32 { return &s.RingVNodes }),
	strField(fSetHasher, func(s *Settings) *string { return &s.RingHasher }),
)

func decodeSettings(body []byte) (*Settings, error) { return settingsCodec.decode(body) }

// Encode returns the Raft entry for s.
func (s *SetSettings) Encode() []byte {
	return settingsCodec.append([]byte{byte(TypeSetSettings)}, &s.Settings)
}

var leaseCodec = newCodec[LeaseRange](nil,
	strField(fLeaseNode, func(l *LeaseRange) *string { return &l.Node }),
	uintField(fLeaseN, func(l *LeaseRange) *uint64 { return &l.N }),
)

// Encode returns the Raft entry for l.
func (l *LeaseRange) Encode() []byte { return leaseCodec.append([]byte{byte(TypeLeaseRange)}, l) }

func decodeLease(body []byte) (*LeaseRange, error) { return leaseCodec.decode(body) }

// placementCodec writes each shard's replicas as one comma-joined string.
var placementCodec = newCodec[Placement](nil,
	uintField(fPlaceVersion, func(p *Placement) *uint64 { return &p.Version }),
	field[Placement]{num: fPlaceShard,
		put: func(b []byte, num protowire.Number, p *Placement) []byte {
			for _, nodes := range p.Shards {
				b = protowire.AppendTag(b, num, protowire.BytesType)
				b = protowire.AppendString(b, strings.Join(nodes, ","))
			}
			return b
		},
		get: func(r fieldReader, typ protowire.Type, num protowire.Number, p *Placement) fieldReader {
			var nodes []string
			if s := r.str(typ, num); s != "" {
				nodes = strings.Split(s, ",")
			}
			p.Shards = append(p.Shards, nodes)
			return r
		},
	},
	stringsField(fPlaceRemoved, func(p *Placement) *[]string { return &p.Removed }),
)

func decodePlacement(body []byte) (*Placement, error) { return placementCodec.decode(body) }

// Encode returns the Raft entry for s.
func (s *SetPlacement) Encode() []byte {
	return placementCodec.append([]byte{byte(TypeSetPlacement)}, &s.Placement)
}

// encodeLink is the wire form of a link (RPC answers): every field.
func encodeLink(l *link.Link) []byte { return linkCodec.append(make([]byte, 0, 80+len(l.URL)), l) }

// encodeStoredLink is the form kept in the shard's bbolt file, under the
// code as key: what the key or a default already says is left out (the
// code, an UpdatedAt equal to CreatedAt, the default redirect), about 20 of
// ~110 bytes for a 60-byte URL. decodeStoredLink puts them back.
func encodeStoredLink(l *link.Link) []byte {
	return storedLinkCodec.append(make([]byte, 0, 64+len(l.URL)), l)
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

// linkFields are a link's fields in writing order; the stored form leaves
// some out (encodeStoredLink).
func linkFields(stored bool) []field[link.Link] {
	always := func(*link.Link) bool { return true }
	code, updated, redirect := always, always, always
	if stored {
		code = func(*link.Link) bool { return false }
		updated = func(l *link.Link) bool { return !l.UpdatedAt.Equal(l.CreatedAt) }
		redirect = func(l *link.Link) bool { return l.Redirect != link.DefaultRedirect }
	}
	return []field[link.Link]{
		only(strField(fCode, func(l *link.Link) *string { return &l.Code }), code),
		strField(fURL, func(l *link.Link) *string { return &l.URL }),
		strField(fOwner, func(l *link.Link) *string { return &l.Owner }),
		timeField(fCreated, func(l *link.Link) *time.Time { return &l.CreatedAt }),
		only(timeField(fUpdated, func(l *link.Link) *time.Time { return &l.UpdatedAt }), updated),
		timeField(fExpires, func(l *link.Link) *time.Time { return &l.ExpiresAt }),
		only(intField(fRedirect, func(l *link.Link) *int { return &l.Redirect }), redirect),
		boolField(fDisabled, func(l *link.Link) *bool { return &l.Disabled }),
		boolField(fDeleted, func(l *link.Link) *bool { return &l.Deleted }),
		uintField(fMaxVisits, func(l *link.Link) *uint64 { return &l.MaxVisits }),
		stringsField(fTag, func(l *link.Link) *[]string { return &l.Tags }),
		uintField(fNonce, func(l *link.Link) *uint64 { return &l.Nonce }),
		uintField(fVersion, func(l *link.Link) *uint64 { return &l.Version }),
		uintField(fVisits, func(l *link.Link) *uint64 { return &l.Visits }),
	}
}

var (
	linkCodec       = newCodec(nil, linkFields(false)...)
	storedLinkCodec = newCodec(nil, linkFields(true)...)
)

func decodeLink(b []byte) (*link.Link, error) { return linkCodec.decode(b) }

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

var consumeVisitCodec = newCodec(func(c *ConsumeVisit) error { return needCode("consume-visit", c.Code) },
	strField(fCode, func(c *ConsumeVisit) *string { return &c.Code }),
	uintField(fNonce, func(c *ConsumeVisit) *uint64 { return &c.Nonce }),
)

// Encode returns the Raft entry for c.
func (c *ConsumeVisit) Encode() []byte {
	return consumeVisitCodec.append([]byte{byte(TypeConsumeVisit)}, c)
}

func decodeConsumeVisit(body []byte) (*ConsumeVisit, error) { return consumeVisitCodec.decode(body) }
