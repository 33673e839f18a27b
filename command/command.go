package command

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/linkraft/linkraft/internal/wire"
	"github.com/linkraft/linkraft/link"
)

// Type is the first byte of every Raft entry. Values are append-only.
type Type uint8

// Command types. 0 is reserved so that a zeroed entry is never valid.
const (
	TypeCreateIfAbsent Type = 1
	TypeUpdate         Type = 2
	TypeDelete         Type = 3
	// TypeClickBatch carries a node's aggregated clicks for one shard. It
	// only adds optional state, so a replica that does not know it may
	// skip it.
	TypeClickBatch   Type = 4 | IgnoreUnknownFlag
	TypeConsumeVisit Type = 5
	TypeCreateBatch  Type = 6
	// TypeClaimKey claims an Idempotency-Key (idempotency.go).
	TypeClaimKey Type = 7
	// TypeRestoreLinks puts a backup's links into a shard (restore.go).
	TypeRestoreLinks Type = 8

	TypeSetSettings  Type = 32
	TypeLeaseRange   Type = 33
	TypeSetPlacement Type = 34
	// TypeRegisterNode records a node's incarnation.
	TypeRegisterNode Type = 35
	TypeCreateKey    Type = 36
	TypeRevokeKey    Type = 37
	TypeSetBlocked   Type = 38
	// TypeAdmitNode registers a node as TypeRegisterNode does and records
	// its feature level.
	TypeAdmitNode Type = 39

	// IgnoreUnknownFlag marks a type that a replica which does not know it
	// may skip instead of panicking (for commands that only add optional
	// state).
	IgnoreUnknownFlag Type = 0x80
)

// CreateIfAbsent creates a link under Code unless the code is in use, by a
// live link or a tombstone: the link Request.NewLink makes (Request.Alias
// is not carried: Code is the alias, or the generated code).
type CreateIfAbsent struct {
	Code string
	Now  time.Time
	// Nonce makes a retried create idempotent: if the code already holds a
	// live link with the same non-zero nonce, that link is returned.
	Nonce   uint64
	Request link.CreateRequest
}

// NewLink is the link c makes as of Raft index version.
func (c *CreateIfAbsent) NewLink(version uint64) *link.Link {
	return c.Request.NewLink(c.Code, c.Now, c.Nonce, version)
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
	SetDropQuery
	SetTitle
	SetDescription
	SetPassword
	SetRules
	SetNote
)

// Update applies Patch (Patch.ApplyTo) to a live link. On the wire the
// patch is a mask of the fields it sets and their values (a zero value
// left out: "" removes a title).
type Update struct {
	Code  string
	Now   time.Time
	Patch link.Patch
	// mask is the decoded entry's mask, until validate settles the patch
	// (Encode writes the mask of Patch).
	mask UpdateMask
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
	// Moves lists the replicas being moved (at most one at a time): the
	// move's To is among its shard's replicas, joining as a non-voter
	// until it has caught up; From leaves once To votes.
	Moves []Move
	// Draining lists nodes an operator is emptying (linknode drain):
	// their replicas move to other nodes, and none is placed on them.
	Draining []string
}

// Move is a replica of Shard moving from node From to node To.
type Move struct {
	Shard    ShardID
	From, To string
}

// MoveOf returns the move of shard s, if one is under way.
func (p *Placement) MoveOf(s ShardID) (Move, bool) {
	for _, m := range p.Moves {
		if m.Shard == s {
			return m, true
		}
	}
	return Move{}, false
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
	fDropQuery = 15
	fTitle     = 16
	fDesc      = 17
	fPassword  = 18
	fRules     = 19
	fNote      = 21 // 20 is an update's mask

	fRuleDevice   = 1
	fRuleCountry  = 2
	fRuleLanguage = 3
	fRuleURL      = 4
	fMask         = 20

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

	fPlaceVersion  = 1
	fPlaceShard    = 2
	fPlaceRemoved  = 3
	fPlaceMove     = 4
	fPlaceDraining = 5

	fMoveShard = 1
	fMoveFrom  = 2
	fMoveTo    = 3
)

// ruleCodec is a link's redirect rule, in commands and records alike.
var ruleCodec = wire.NewCodec(nil,
	wire.String(fRuleDevice, func(r *link.Rule) *string { return &r.Device }),
	wire.String(fRuleCountry, func(r *link.Rule) *string { return &r.Country }),
	wire.String(fRuleLanguage, func(r *link.Rule) *string { return &r.Language }),
	wire.String(fRuleURL, func(r *link.Rule) *string { return &r.URL }),
)

var createCodec = wire.NewCodec(func(c *CreateIfAbsent) error { return needCode("create", c.Code) }, createFields()...)

// Encode returns the Raft entry for c.
func (c *CreateIfAbsent) Encode() []byte {
	return createCodec.Append(append(make([]byte, 0, 64+len(c.Request.URL)), byte(TypeCreateIfAbsent)), c)
}

// EncodedSize is the length of c's encoding inside a CreateBatch entry
// (give or take a few bytes of framing).
func (c *CreateIfAbsent) EncodedSize() int { return len(createCodec.Append(nil, c)) + 4 }

var updateCodec = wire.NewCodec(func(u *Update) error { return needCode("update", u.Code) }, updateFields()...)

// Encode returns the Raft entry for u.
func (u *Update) Encode() []byte {
	var n int
	if u.Patch.URL != nil {
		n = len(*u.Patch.URL)
	}
	return updateCodec.Append(append(make([]byte, 0, 64+n), byte(TypeUpdate)), u)
}

var deleteCodec = wire.NewCodec(func(d *Delete) error { return needCode("delete", d.Code) },
	wire.String(fCode, func(d *Delete) *string { return &d.Code }),
	wire.Time(fCreated, func(d *Delete) *time.Time { return &d.Now }),
)

// Encode returns the Raft entry for d.
func (d *Delete) Encode() []byte { return deleteCodec.Append([]byte{byte(TypeDelete)}, d) }

var settingsCodec = wire.NewCodec[Settings](nil,
	wire.String(fSetCluster, func(s *Settings) *string { return &s.ClusterID }),
	wire.Uint(fSetShards, func(s *Settings) *uint32 { return &s.Shards }),
	wire.Uint(fSetParts, func(s *Settings) *uint32 { return &s.PartitionCount }),
	wire.Uint(fSetRF, func(s *Settings) *uint32 { return &s.ReplicationFactor }),
	wire.Float(fSetLoad, func(s *Settings) *float64 { return &s.Load }),
	wire.String(fSetCodeMode, func(s *Settings) *string { return &s.CodeMode }),
	wire.Bytes(fSetCodeKey, func(s *Settings) *[]byte { return &s.CodeKey }),
	wire.Time(fSetCreatedAt, func(s *Settings) *time.Time { return &s.CreatedAt }),
	wire.Uint(fSetVNodes, func(s *Settings) *uint32 { return &s.RingVNodes }),
	wire.String(fSetHasher, func(s *Settings) *string { return &s.RingHasher }),
)

// Encode returns the Raft entry for s.
func (s *SetSettings) Encode() []byte {
	return settingsCodec.Append([]byte{byte(TypeSetSettings)}, &s.Settings)
}

// AppendTo appends the settings message (the meta group's record).
func (s *Settings) AppendTo(b []byte) []byte { return settingsCodec.Append(b, s) }

// Unmarshal reads what AppendTo wrote.
func (s *Settings) Unmarshal(body []byte) error { return settingsCodec.DecodeInto(body, s) }

var leaseCodec = wire.NewCodec[LeaseRange](nil,
	wire.String(fLeaseNode, func(l *LeaseRange) *string { return &l.Node }),
	wire.Uint(fLeaseN, func(l *LeaseRange) *uint64 { return &l.N }),
)

// Encode returns the Raft entry for l.
func (l *LeaseRange) Encode() []byte { return leaseCodec.Append([]byte{byte(TypeLeaseRange)}, l) }

// placementCodec writes each shard's replicas as one comma-joined string.
var placementCodec = wire.NewCodec[Placement](nil,
	wire.Uint(fPlaceVersion, func(p *Placement) *uint64 { return &p.Version }),
	wire.Field[Placement]{Num: fPlaceShard,
		Put: func(b []byte, num protowire.Number, p *Placement) []byte {
			for _, nodes := range p.Shards {
				b = protowire.AppendTag(b, num, protowire.BytesType)
				b = protowire.AppendString(b, strings.Join(nodes, ","))
			}
			return b
		},
		Get: func(r wire.Reader, typ protowire.Type, num protowire.Number, p *Placement) wire.Reader {
			var nodes []string
			if s := r.Str(typ, num); s != "" {
				nodes = strings.Split(s, ",")
			}
			p.Shards = append(p.Shards, nodes)
			return r
		},
	},
	wire.Strings(fPlaceRemoved, func(p *Placement) *[]string { return &p.Removed }),
	wire.Messages(fPlaceMove, moveCodec, func(p *Placement) *[]Move { return &p.Moves }),
	wire.Strings(fPlaceDraining, func(p *Placement) *[]string { return &p.Draining }),
)

var moveCodec = wire.NewCodec[Move](nil,
	wire.Int(fMoveShard, func(m *Move) *int { return (*int)(&m.Shard) }),
	wire.String(fMoveFrom, func(m *Move) *string { return &m.From }),
	wire.String(fMoveTo, func(m *Move) *string { return &m.To }),
)

// Encode returns the Raft entry for s.
func (s *SetPlacement) Encode() []byte {
	return placementCodec.Append([]byte{byte(TypeSetPlacement)}, &s.Placement)
}

// AppendTo appends the placement message (the meta group's record).
func (p *Placement) AppendTo(b []byte) []byte { return placementCodec.Append(b, p) }

// Unmarshal reads what AppendTo wrote.
func (p *Placement) Unmarshal(body []byte) error { return placementCodec.DecodeInto(body, p) }

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

var consumeVisitCodec = wire.NewCodec(func(c *ConsumeVisit) error { return needCode("consume-visit", c.Code) },
	wire.String(fCode, func(c *ConsumeVisit) *string { return &c.Code }),
	wire.Uint(fNonce, func(c *ConsumeVisit) *uint64 { return &c.Nonce }),
)

// Encode returns the Raft entry for c.
func (c *ConsumeVisit) Encode() []byte {
	return consumeVisitCodec.Append([]byte{byte(TypeConsumeVisit)}, c)
}

// MaxCreateBatch bounds the creates in one CreateBatch entry, so that an
// entry stays far below the RPC frame and raft's message sizes.
const MaxCreateBatch = 1024

// fBatchCreate is the field of each create in a CreateBatch.
const fBatchCreate = 1

// CreateBatch is many CreateIfAbsent in one Raft entry: a bulk import pays
// one commit (one fsync on each replica) per batch instead of per link. Each
// create succeeds or fails on its own, exactly as it would alone; the
// response is a *BatchResult with one Result per create, in order.
type CreateBatch struct {
	Creates []CreateIfAbsent
}

var createBatchCodec = wire.NewCodec(func(c *CreateBatch) error {
	if len(c.Creates) == 0 {
		return fmt.Errorf("%w: create batch without creates", wire.ErrDecode)
	}
	return nil
}, wire.Messages(fBatchCreate, createCodec, func(c *CreateBatch) *[]CreateIfAbsent { return &c.Creates }))

// Encode returns the Raft entry for c.
func (c *CreateBatch) Encode() []byte {
	size := 1
	for i := range c.Creates {
		size += 80 + len(c.Creates[i].Request.URL)
	}
	return createBatchCodec.Append(append(make([]byte, 0, size), byte(TypeCreateBatch)), c)
}

// RegisterNode records Node's Incarnation, unless Node is registered with
// another one.
type RegisterNode struct {
	Node        string
	Incarnation string
	At          time.Time
	// Level is the node's feature level, set only in an AdmitNode (a
	// RegisterNode entry leaves it out, as the versions before it wrote
	// them).
	Level uint32
}

const (
	fRegNode  = 1
	fRegInc   = 2
	fRegAt    = 3
	fRegLevel = 4
)

var registerNodeCodec = wire.NewCodec[RegisterNode](nil,
	wire.String(fRegNode, func(r *RegisterNode) *string { return &r.Node }),
	wire.String(fRegInc, func(r *RegisterNode) *string { return &r.Incarnation }),
	wire.Time(fRegAt, func(r *RegisterNode) *time.Time { return &r.At }),
	wire.Uint(fRegLevel, func(r *RegisterNode) *uint32 { return &r.Level }),
)

// AdmitNode registers Member.Node with Member.Incarnation, as a
// RegisterNode does, and records Member.Level as the node's feature level
// (the level it gossiped when the meta leader admitted it). The registry's
// levels are what fields an older replica would drop wait for: every
// registered node, live or down, must be at their level.
type AdmitNode struct {
	Member RegisterNode
}

// Encode returns the Raft entry for a.
func (a *AdmitNode) Encode() []byte {
	return registerNodeCodec.Append([]byte{byte(TypeAdmitNode)}, &a.Member)
}

func (a *AdmitNode) validate() error {
	if a.Member.Level == 0 || a.Member.Level > maxFeatureLevel {
		return invalid("feature level %d", a.Member.Level)
	}
	return a.Member.validate()
}

// maxFeatureLevel bounds a recorded feature level.
const maxFeatureLevel = 1 << 16

// Encode returns the Raft entry for r.
func (r *RegisterNode) Encode() []byte {
	return registerNodeCodec.Append([]byte{byte(TypeRegisterNode)}, r)
}

// AppendTo appends the message (the meta group's member record leaves
// Node out: it is the key).
func (r *RegisterNode) AppendTo(b []byte) []byte { return registerNodeCodec.Append(b, r) }

// Unmarshal reads what AppendTo wrote.
func (r *RegisterNode) Unmarshal(body []byte) error { return registerNodeCodec.DecodeInto(body, r) }

func (r *RegisterNode) validate() error {
	if r.Node == "" || len(r.Node) > maxNodeID {
		return invalid("register node %q", truncate(r.Node))
	}
	if r.Incarnation == "" || len(r.Incarnation) > maxNodeID {
		return invalid("incarnation %q", truncate(r.Incarnation))
	}
	return nil
}

// needCode is the check of messages that name a link.
func needCode(what string, code string) error {
	if code == "" {
		return fmt.Errorf("%w: %s without a code", wire.ErrDecode, what)
	}
	return nil
}
