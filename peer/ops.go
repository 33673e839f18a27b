package peer

import (
	"context"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/wire"
	"github.com/linkraft/linkraft/link"
)

// Every operation of the protocol: its id, its request and response
// messages with their codecs, and the client's stub. Ids and field numbers
// are append-only (testdata/messages.golden pins the bytes).

// OpID names an operation on the wire. 0 is the hello.
type OpID uint32

// Op is an operation whose request is Req and response Resp.
type Op[Req, Resp any] struct {
	ID   OpID
	Name string
	req  *wire.Codec[Req]
	resp *wire.Codec[Resp]
}

// Hello opens a connection: the client's version, answered with the
// server's.
type Hello struct{ Version uint32 }

// ProtocolVersion is this version of the protocol.
const ProtocolVersion = 1

var helloCodec = wire.NewCodec(nil, wire.Uint(1, func(h *Hello) *uint32 { return &h.Version }))

// opHello is the connection's first request.
var opHello = Op[Hello, Hello]{ID: 0, Name: "hello", req: helloCodec, resp: helloCodec}

// ApplyRequest proposes Command in Group on its leader; Hops counts the
// nodes it passed through (a node forwards at most twice).
type ApplyRequest struct {
	Group   command.GroupID
	Command []byte
	Hops    int
}

// ApplyResponse is what the group answered to the command (the fields its
// type answers with), and the peer address of the leader that applied it.
type ApplyResponse struct {
	Leader string
	// Link answers a create, update, delete or visit grant.
	Link *link.Link
	// LeaseStart and LeaseEnd answer a LeaseRange: [start, end).
	LeaseStart, LeaseEnd uint64
	// Placement answers a SetPlacement (with ErrStalePlacement too).
	Placement *command.Placement
	// Batch answers a CreateBatch, one result per create.
	Batch []command.LinkResult
	// Claim answers a ClaimKey.
	Claim *command.ClaimResult
	// Restore answers a RestoreLinks.
	Restore *command.RestoreResult
}

// OpApply forwards a command to its group's leader.
var OpApply = Op[ApplyRequest, ApplyResponse]{ID: 1, Name: "apply",
	req: wire.NewCodec(nil,
		wire.Uint(1, func(r *ApplyRequest) *command.GroupID { return &r.Group }),
		wire.Bytes(2, func(r *ApplyRequest) *[]byte { return &r.Command }),
		wire.Int(3, func(r *ApplyRequest) *int { return &r.Hops }),
	),
	resp: wire.NewCodec(nil,
		wire.String(1, func(r *ApplyResponse) *string { return &r.Leader }),
		linkField(2, func(r *ApplyResponse) **link.Link { return &r.Link }),
		wire.Uint(3, func(r *ApplyResponse) *uint64 { return &r.LeaseStart }),
		wire.Uint(4, func(r *ApplyResponse) *uint64 { return &r.LeaseEnd }),
		nested(5, func(r *ApplyResponse) **command.Placement { return &r.Placement }),
		wire.Messages(6, linkResultCodec, func(r *ApplyResponse) *[]command.LinkResult { return &r.Batch }),
		claimField(7, func(r *ApplyResponse) **command.ClaimResult { return &r.Claim }),
		optionalMessage(8, restoreResultCodec, func(r *ApplyResponse) **command.RestoreResult { return &r.Restore }),
	),
}

var restoreResultCodec = wire.NewCodec(nil,
	wire.Int(1, func(r *command.RestoreResult) *int { return &r.Restored }),
	wire.Int(2, func(r *command.RestoreResult) *int { return &r.Present }),
	wire.Strings(3, func(r *command.RestoreResult) *[]string { return &r.Conflicts }),
)

// Apply forwards cmd to group's leader through the node at addr.
func (c *Client) Apply(ctx context.Context, addr string, group command.GroupID, cmd []byte, hops int) (*ApplyResponse, error) {
	return Call(ctx, c, addr, OpApply, &ApplyRequest{Group: group, Command: cmd, Hops: hops})
}

// LookupRequest reads Code on a replica of Shard (Consistent: on its
// leader, linearizably).
type LookupRequest struct {
	Shard      command.ShardID
	Code       string
	Consistent bool
	Hops       int
}

// LinkResponse is one link.
type LinkResponse struct{ Link *link.Link }

// OpLookup reads a link (tombstones included) for a redirect or the API.
var OpLookup = Op[LookupRequest, LinkResponse]{ID: 2, Name: "lookup",
	req: wire.NewCodec(nil,
		wire.Int(1, func(r *LookupRequest) *int { return (*int)(&r.Shard) }),
		wire.String(2, func(r *LookupRequest) *string { return &r.Code }),
		wire.Bool(3, func(r *LookupRequest) *bool { return &r.Consistent }),
		wire.Int(4, func(r *LookupRequest) *int { return &r.Hops }),
	),
	resp: wire.NewCodec(nil, linkField(1, func(r *LinkResponse) **link.Link { return &r.Link })),
}

// Lookup reads code of shard through the node at addr.
func (c *Client) Lookup(ctx context.Context, addr string, shard command.ShardID, code string, consistent bool, hops int) (*link.Link, error) {
	r, err := Call(ctx, c, addr, OpLookup, &LookupRequest{Shard: shard, Code: code, Consistent: consistent, Hops: hops})
	if err != nil {
		return nil, err
	}
	if r.Link == nil {
		return nil, link.ErrNotFound
	}
	return r.Link, nil
}

// ClicksRequest reads Code's click totals and its hourly counts in
// [From, To) from the answering node's replica of Shard.
type ClicksRequest struct {
	Shard    command.ShardID
	Code     string
	From, To time.Time
}

// ClicksResponse is the click state read.
type ClicksResponse struct{ Stats *command.ClickStats }

// OpClicks reads a link's click state on a replica.
var OpClicks = Op[ClicksRequest, ClicksResponse]{ID: 3, Name: "clicks",
	req: wire.NewCodec(nil,
		wire.Int(1, func(r *ClicksRequest) *int { return (*int)(&r.Shard) }),
		wire.String(2, func(r *ClicksRequest) *string { return &r.Code }),
		wire.Time(3, func(r *ClicksRequest) *time.Time { return &r.From }),
		wire.Time(4, func(r *ClicksRequest) *time.Time { return &r.To }),
	),
	resp: wire.NewCodec(nil, nested(1, func(r *ClicksResponse) **command.ClickStats { return &r.Stats })),
}

// Clicks reads code's click state in [from, to) from the node at addr.
func (c *Client) Clicks(ctx context.Context, addr string, shard command.ShardID, code string, from, to time.Time) (*command.ClickStats, error) {
	r, err := Call(ctx, c, addr, OpClicks, &ClicksRequest{Shard: shard, Code: code, From: from, To: to})
	if err != nil {
		return nil, err
	}
	if r.Stats == nil {
		return &command.ClickStats{}, nil
	}
	return r.Stats, nil
}

// VisitsRequest reads the answering node's raw visits of Code in
// [From, To), newest first, at most Limit.
type VisitsRequest struct {
	Code     string
	From, To time.Time
	Limit    int
}

// VisitsResponse is a node's raw visits.
type VisitsResponse struct{ Visits []link.Visit }

var visitCodec = wire.NewCodec(nil,
	wire.String(1, func(v *link.Visit) *string { return &v.Code }),
	wire.Time(2, func(v *link.Visit) *time.Time { return &v.Time }),
	wire.String(3, func(v *link.Visit) *string { return &v.Node }),
	wire.String(4, func(v *link.Visit) *string { return &v.Network }),
	wire.String(5, func(v *link.Visit) *string { return &v.Country }),
	wire.String(6, func(v *link.Visit) *string { return &v.UserAgent }),
	wire.String(7, func(v *link.Visit) *string { return &v.Referer }),
	wire.Bool(8, func(v *link.Visit) *bool { return &v.Bot }),
)

// OpVisits gathers a node's raw visits of a link.
var OpVisits = Op[VisitsRequest, VisitsResponse]{ID: 4, Name: "visits",
	req: wire.NewCodec(nil,
		wire.String(1, func(r *VisitsRequest) *string { return &r.Code }),
		wire.Time(2, func(r *VisitsRequest) *time.Time { return &r.From }),
		wire.Time(3, func(r *VisitsRequest) *time.Time { return &r.To }),
		wire.Int(4, func(r *VisitsRequest) *int { return &r.Limit }),
	),
	resp: wire.NewCodec(nil, wire.Messages(1, visitCodec, func(r *VisitsResponse) *[]link.Visit { return &r.Visits })),
}

// Visits reads the raw visits the node at addr keeps of code.
func (c *Client) Visits(ctx context.Context, addr, code string, from, to time.Time, limit int) ([]link.Visit, error) {
	r, err := Call(ctx, c, addr, OpVisits, &VisitsRequest{Code: code, From: from, To: to, Limit: limit})
	if err != nil {
		return nil, err
	}
	return r.Visits, nil
}

// OrphansRequest reads the answering node's counts of requests for
// unknown codes, its Limit most frequent.
type OrphansRequest struct{ Limit int }

var codeCountCodec = wire.NewCodec(nil,
	wire.String(1, func(c *link.CodeCount) *string { return &c.Code }),
	wire.Uint(2, func(c *link.CodeCount) *uint64 { return &c.Count }),
)

// OpOrphans gathers a node's unknown-code counts.
var OpOrphans = Op[OrphansRequest, link.OrphanSummary]{ID: 5, Name: "orphans",
	req: wire.NewCodec(nil, wire.Int(1, func(r *OrphansRequest) *int { return &r.Limit })),
	resp: wire.NewCodec(nil,
		wire.Uint(1, func(s *link.OrphanSummary) *uint64 { return &s.Total }),
		wire.Messages(2, codeCountCodec, func(s *link.OrphanSummary) *[]link.CodeCount { return &s.Top }),
	),
}

// Orphans reads the unknown-code counts of the node at addr.
func (c *Client) Orphans(ctx context.Context, addr string, limit int) (*link.OrphanSummary, error) {
	return Call(ctx, c, addr, OpOrphans, &OrphansRequest{Limit: limit})
}

// ListRequest reads Shard's part of a listing on its leader.
type ListRequest struct {
	Shard command.ShardID
	Query link.ListQuery
	Hops  int
}

// ListedLink is one link of a listing, with its human clicks.
type ListedLink struct {
	Link   *link.Link
	Clicks uint64
}

// ListResponse is a shard's part of a listing: its links in the listing's
// order; More says it may have more past the last (the answer was cut at
// its size), Stop where its scan ran out (link.ListQuery.Scan).
type ListResponse struct {
	Links []ListedLink
	More  bool
	Stop  *link.ListPosition
}

var positionCodec = wire.NewCodec(nil,
	wire.Time(1, func(p *link.ListPosition) *time.Time { return &p.Created }),
	wire.Uint(2, func(p *link.ListPosition) *uint64 { return &p.Clicks }),
	wire.String(3, func(p *link.ListPosition) *string { return &p.Code }),
)

var queryCodec = wire.NewCodec(nil,
	wire.String(1, func(q *link.ListQuery) *string { return &q.Owner }),
	wire.String(2, func(q *link.ListQuery) *string { return &q.Tag }),
	wire.String(3, func(q *link.ListQuery) *string { return &q.Text }),
	wire.Time(4, func(q *link.ListQuery) *time.Time { return &q.CreatedAfter }),
	wire.Time(5, func(q *link.ListQuery) *time.Time { return &q.CreatedBefore }),
	optionalBool(6, func(q *link.ListQuery) **bool { return &q.Expired }),
	optionalBool(7, func(q *link.ListQuery) **bool { return &q.Disabled }),
	wire.Time(8, func(q *link.ListQuery) *time.Time { return &q.Now }),
	wire.Bool(9, func(q *link.ListQuery) *bool { return &q.Desc }),
	wire.Bool(10, func(q *link.ListQuery) *bool { return &q.ByClicks }),
	optionalMessage(11, positionCodec, func(q *link.ListQuery) **link.ListPosition { return &q.After }),
	wire.Int(12, func(q *link.ListQuery) *int { return &q.Limit }),
	wire.Int(13, func(q *link.ListQuery) *int { return &q.Scan }),
)

var listedCodec = wire.NewCodec(nil,
	linkField(1, func(l *ListedLink) **link.Link { return &l.Link }),
	wire.Uint(2, func(l *ListedLink) *uint64 { return &l.Clicks }),
)

// OpList reads a shard's part of a listing.
var OpList = Op[ListRequest, ListResponse]{ID: 6, Name: "list",
	req: wire.NewCodec(nil,
		wire.Int(1, func(r *ListRequest) *int { return (*int)(&r.Shard) }),
		wire.Message(2, queryCodec, func(r *ListRequest) *link.ListQuery { return &r.Query }),
		wire.Int(3, func(r *ListRequest) *int { return &r.Hops }),
	),
	resp: wire.NewCodec(nil,
		wire.Messages(1, listedCodec, func(r *ListResponse) *[]ListedLink { return &r.Links }),
		wire.Bool(2, func(r *ListResponse) *bool { return &r.More }),
		optionalMessage(3, positionCodec, func(r *ListResponse) **link.ListPosition { return &r.Stop }),
	),
}

// List reads shard's part of listing q through the node at addr.
func (c *Client) List(ctx context.Context, addr string, shard command.ShardID, q link.ListQuery, hops int) (*ListResponse, error) {
	return Call(ctx, c, addr, OpList, &ListRequest{Shard: shard, Query: q, Hops: hops})
}

// TagsRequest counts the tags of Shard's live links (Owner's, or every
// owner's) on its leader.
type TagsRequest struct {
	Shard command.ShardID
	Owner string
	Hops  int
}

// TagsResponse is a shard's tag counts.
type TagsResponse struct{ Tags []link.TagCount }

var tagCountCodec = wire.NewCodec(nil,
	wire.String(1, func(t *link.TagCount) *string { return &t.Tag }),
	wire.Uint(2, func(t *link.TagCount) *uint64 { return &t.Links }),
)

// OpTags counts a shard's tags.
var OpTags = Op[TagsRequest, TagsResponse]{ID: 7, Name: "tags",
	req: wire.NewCodec(nil,
		wire.Int(1, func(r *TagsRequest) *int { return (*int)(&r.Shard) }),
		wire.String(2, func(r *TagsRequest) *string { return &r.Owner }),
		wire.Int(3, func(r *TagsRequest) *int { return &r.Hops }),
	),
	resp: wire.NewCodec(nil, wire.Messages(1, tagCountCodec, func(r *TagsResponse) *[]link.TagCount { return &r.Tags })),
}

// Tags counts shard's tags through the node at addr.
func (c *Client) Tags(ctx context.Context, addr string, shard command.ShardID, owner string, hops int) ([]link.TagCount, error) {
	r, err := Call(ctx, c, addr, OpTags, &TagsRequest{Shard: shard, Owner: owner, Hops: hops})
	if err != nil {
		return nil, err
	}
	return r.Tags, nil
}

// Promise answers of the formation handshake.
const (
	PromiseAccepted = "accepted"
	PromiseRefused  = "refused"
	PromiseFormed   = "formed"
)

// PromiseRequest asks a new node for its promise to let Proposer form the
// cluster.
type PromiseRequest struct{ Proposer string }

// PromiseResponse is the answer (PromiseAccepted, ...) and, when refused,
// the proposer the node is bound to.
type PromiseResponse struct{ Answer, Holder string }

// OpPromise is the formation's promise request.
var OpPromise = Op[PromiseRequest, PromiseResponse]{ID: 8, Name: "form-promise",
	req: wire.NewCodec(nil, wire.String(1, func(r *PromiseRequest) *string { return &r.Proposer })),
	resp: wire.NewCodec(nil,
		wire.String(1, func(r *PromiseResponse) *string { return &r.Answer }),
		wire.String(2, func(r *PromiseResponse) *string { return &r.Holder }),
	),
}

// Promise asks the node at addr for its promise to proposer.
func (c *Client) Promise(ctx context.Context, addr, proposer string) (*PromiseResponse, error) {
	return Call(ctx, c, addr, OpPromise, &PromiseRequest{Proposer: proposer})
}

// ReleaseRequest asks a proposer to release Promiser's promise.
type ReleaseRequest struct{ Promiser string }

// ReleaseResponse says whether it was released.
type ReleaseResponse struct{ Released bool }

// OpRelease is the formation's release request.
var OpRelease = Op[ReleaseRequest, ReleaseResponse]{ID: 9, Name: "form-release",
	req:  wire.NewCodec(nil, wire.String(1, func(r *ReleaseRequest) *string { return &r.Promiser })),
	resp: wire.NewCodec(nil, wire.Bool(1, func(r *ReleaseResponse) *bool { return &r.Released })),
}

// Release asks the proposer at addr to release promiser.
func (c *Client) Release(ctx context.Context, addr, promiser string) (bool, error) {
	r, err := Call(ctx, c, addr, OpRelease, &ReleaseRequest{Promiser: promiser})
	if err != nil {
		return false, err
	}
	return r.Released, nil
}

// DumpRequest reads Shard's records after code After on its leader, for
// a backup.
type DumpRequest struct {
	Shard command.ShardID
	After string
	Hops  int
}

// DumpResponse is a part of a shard's records in code order; More says
// others follow. ReadAt is the shard's applied index when it was read.
type DumpResponse struct {
	Links  []command.RestoredLink
	More   bool
	ReadAt uint64
}

var restoredCodec = wire.NewCodec(nil,
	wire.String(1, func(r *command.RestoredLink) *string { return &r.Code }),
	wire.Bytes(2, func(r *command.RestoredLink) *[]byte { return &r.Record }),
	embedded(3, func(r *command.RestoredLink) *command.ClickStats { return &r.Clicks }),
)

// OpDump reads a part of a shard for a backup.
var OpDump = Op[DumpRequest, DumpResponse]{ID: 10, Name: "dump",
	req: wire.NewCodec(nil,
		wire.Int(1, func(r *DumpRequest) *int { return (*int)(&r.Shard) }),
		wire.String(2, func(r *DumpRequest) *string { return &r.After }),
		wire.Int(3, func(r *DumpRequest) *int { return &r.Hops }),
	),
	resp: wire.NewCodec(nil,
		wire.Messages(1, restoredCodec, func(r *DumpResponse) *[]command.RestoredLink { return &r.Links }),
		wire.Bool(2, func(r *DumpResponse) *bool { return &r.More }),
		wire.Uint(3, func(r *DumpResponse) *uint64 { return &r.ReadAt }),
	),
}

// Dump reads shard's records after code after through the node at addr.
func (c *Client) Dump(ctx context.Context, addr string, shard command.ShardID, after string, hops int) (*DumpResponse, error) {
	return Call(ctx, c, addr, OpDump, &DumpRequest{Shard: shard, After: after, Hops: hops})
}

// ReadIndexRequest asks Group's leader for a read point (raftgroup's
// ReadIndex): a replica that has applied through it reads linearizably.
type ReadIndexRequest struct{ Group command.GroupID }

// ReadIndexResponse is the read point.
type ReadIndexResponse struct{ Index uint64 }

// OpReadIndex asks a group's leader for a read point.
var OpReadIndex = Op[ReadIndexRequest, ReadIndexResponse]{ID: 11, Name: "read-index",
	req:  wire.NewCodec(nil, wire.Uint(1, func(r *ReadIndexRequest) *command.GroupID { return &r.Group })),
	resp: wire.NewCodec(nil, wire.Uint(1, func(r *ReadIndexResponse) *uint64 { return &r.Index })),
}

// ReadIndex asks the node at addr, group's leader, for a read point.
func (c *Client) ReadIndex(ctx context.Context, addr string, group command.GroupID) (uint64, error) {
	r, err := Call(ctx, c, addr, OpReadIndex, &ReadIndexRequest{Group: group})
	if err != nil {
		return 0, err
	}
	return r.Index, nil
}

// AppliedRequest asks a node how far its replica of Group has applied.
type AppliedRequest struct{ Group command.GroupID }

// AppliedResponse is the replica's applied index.
type AppliedResponse struct{ Index uint64 }

// OpApplied asks a node how far its replica of a group has applied: a
// shard's leader asks a replica joining as a non-voter, and promotes it
// once it has caught up.
var OpApplied = Op[AppliedRequest, AppliedResponse]{ID: 12, Name: "applied",
	req:  wire.NewCodec(nil, wire.Uint(1, func(r *AppliedRequest) *command.GroupID { return &r.Group })),
	resp: wire.NewCodec(nil, wire.Uint(1, func(r *AppliedResponse) *uint64 { return &r.Index })),
}

// Applied asks the node at addr how far its replica of group has applied.
func (c *Client) Applied(ctx context.Context, addr string, group command.GroupID) (uint64, error) {
	r, err := Call(ctx, c, addr, OpApplied, &AppliedRequest{Group: group})
	if err != nil {
		return 0, err
	}
	return r.Index, nil
}

// Field kinds of the messages above.

// coded is a message held by pointer (nil: absent) and written by a codec
// of its own: enc writes it, dec reads it.
func coded[M, T any](num protowire.Number, p func(*M) **T, enc func(*T) []byte, dec func([]byte) (*T, error)) wire.Field[M] {
	return wire.Field[M]{Num: num,
		Put: func(b []byte, num protowire.Number, m *M) []byte {
			if v := *p(m); v != nil {
				return wire.AppendMessage(b, num, enc(v))
			}
			return b
		},
		Get: func(r wire.Reader, typ protowire.Type, num protowire.Number, m *M) wire.Reader {
			body := r.Bytes(typ, num)
			if r.Err() == nil {
				v, err := dec(body)
				if err != nil {
					r.SetErr(err)
				}
				*p(m) = v
			}
			return r
		},
	}
}

// linkField is a link in its wire form (command.EncodeLink).
func linkField[M any](num protowire.Number, p func(*M) **link.Link) wire.Field[M] {
	return coded(num, p, command.EncodeLink, command.DecodeLink)
}

// record is a message of package command with its own codec.
type record[T any] interface {
	*T
	AppendTo([]byte) []byte
	Unmarshal([]byte) error
}

// nested is a command record (Placement, ClickStats, ...) as a message.
func nested[M, T any, PT record[T]](num protowire.Number, p func(*M) **T) wire.Field[M] {
	return coded(num, p,
		func(v *T) []byte { return PT(v).AppendTo(nil) },
		func(b []byte) (*T, error) { v := new(T); return v, PT(v).Unmarshal(b) })
}

// embedded is a command record held by value, always written.
func embedded[M, T any, PT record[T]](num protowire.Number, p func(*M) PT) wire.Field[M] {
	return wire.Field[M]{Num: num,
		Put: func(b []byte, num protowire.Number, m *M) []byte {
			return wire.AppendMessage(b, num, p(m).AppendTo(nil))
		},
		Get: func(r wire.Reader, typ protowire.Type, num protowire.Number, m *M) wire.Reader {
			body := r.Bytes(typ, num)
			if r.Err() == nil {
				if err := p(m).Unmarshal(body); err != nil {
					r.SetErr(err)
				}
			}
			return r
		},
	}
}

// optionalMessage is a message that may be absent (nil).
func optionalMessage[M, S any](num protowire.Number, sub *wire.Codec[S], p func(*M) **S) wire.Field[M] {
	return wire.Optional(wire.Message(num, sub, func(s *S) *S { return s }), p)
}

// optionalBool is a bool that may be absent (nil); set, it is written even
// when false.
func optionalBool[M any](num protowire.Number, p func(*M) **bool) wire.Field[M] {
	return wire.Field[M]{Num: num,
		Put: func(b []byte, num protowire.Number, m *M) []byte {
			if v := *p(m); v != nil {
				b = protowire.AppendTag(b, num, protowire.VarintType)
				return protowire.AppendVarint(b, protowire.EncodeBool(*v))
			}
			return b
		},
		Get: func(r wire.Reader, typ protowire.Type, num protowire.Number, m *M) wire.Reader {
			v := r.Uint(typ, num) != 0
			*p(m) = &v
			return r
		},
	}
}

// linkResultCodec is one result of a batch: the link, or the error.
var linkResultCodec = wire.NewCodec(nil,
	linkField(1, func(r *command.LinkResult) **link.Link { return &r.Link }),
	errorField(2, func(r *command.LinkResult) *error { return &r.Err }),
)

// errorField is an error as its code and detail (errors.go).
func errorField[M any](num protowire.Number, p func(*M) *error) wire.Field[M] {
	type coded struct {
		Code   uint32
		Detail string
	}
	codec := wire.NewCodec(nil,
		wire.Uint(1, func(c *coded) *uint32 { return &c.Code }),
		wire.String(2, func(c *coded) *string { return &c.Detail }),
	)
	return wire.Field[M]{Num: num,
		Put: func(b []byte, num protowire.Number, m *M) []byte {
			if err := *p(m); err != nil {
				code, detail := errorCode(err)
				return wire.AppendMessage(b, num, codec.Append(nil, &coded{code, detail}))
			}
			return b
		},
		Get: func(r wire.Reader, typ protowire.Type, num protowire.Number, m *M) wire.Reader {
			body := r.Bytes(typ, num)
			var c coded
			if r.Err() == nil {
				if err := codec.DecodeInto(body, &c); err != nil {
					r.SetErr(err)
				}
				if c.Code == 0 {
					c.Code = codeInternal // present, it is an error
				}
				*p(m) = errorOf(c.Code, c.Detail)
			}
			return r
		},
	}
}

// claimField is a ClaimKey's answer: the claim record and whether it
// existed.
func claimField[M any](num protowire.Number, p func(*M) **command.ClaimResult) wire.Field[M] {
	codec := wire.NewCodec(nil,
		embedded(1, func(c *command.ClaimResult) *command.Claim { return &c.Claim }),
		wire.Bool(2, func(c *command.ClaimResult) *bool { return &c.Existing }),
	)
	return optionalMessage(num, codec, p)
}
