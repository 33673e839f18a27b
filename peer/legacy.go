package peer

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/link"
)

// The protocol of the versions before this one: one JSON document per
// frame on transport.KindRPC, whose fields changed meaning per operation.
// A node of this version answers it (ServeLegacy), and speaks it to a peer
// that closes a connection of this protocol at the hello, so that a
// rolling upgrade from that version keeps every node reachable both ways.
// It goes once no version before ProtocolVersion 1 can share a cluster
// with the current one: delete this file, its test, ServeLegacy and
// ClientConfig.DialLegacy.

// legacyRequest is the JSON request.
type legacyRequest struct {
	Op         string          `json:"op"`
	Group      uint64          `json:"group"`
	Cmd        []byte          `json:"cmd,omitempty"`
	Code       string          `json:"code,omitempty"`
	Consistent bool            `json:"consistent,omitempty"`
	Hops       int             `json:"hops,omitempty"`
	TimeoutMS  int64           `json:"timeout_ms,omitempty"`
	From       int64           `json:"from,omitempty"`
	To         int64           `json:"to,omitempty"`
	Limit      int             `json:"limit,omitempty"`
	List       *link.ListQuery `json:"list,omitempty"`
	Owner      string          `json:"owner,omitempty"`
}

// legacyResponse is the JSON response.
type legacyResponse struct {
	Link       []byte               `json:"link,omitempty"`
	Err        string               `json:"err,omitempty"`
	Detail     string               `json:"detail,omitempty"`
	LeaseStart uint64               `json:"lease_start,omitempty"`
	LeaseEnd   uint64               `json:"lease_end,omitempty"`
	Placement  *command.Placement   `json:"placement,omitempty"`
	Clicks     []byte               `json:"clicks,omitempty"`
	Visits     []link.Visit         `json:"visits,omitempty"`
	Orphans    *link.OrphanSummary  `json:"orphans,omitempty"`
	Batch      []legacyItem         `json:"batch,omitempty"`
	Form       string               `json:"form,omitempty"`
	Leader     string               `json:"leader,omitempty"`
	More       bool                 `json:"more,omitempty"`
	Counted    bool                 `json:"counted,omitempty"`
	Stop       *link.ListPosition   `json:"stop,omitempty"`
	Tags       map[string]uint64    `json:"tags,omitempty"`
	Claim      *command.ClaimResult `json:"claim,omitempty"`
}

type legacyItem struct {
	Link   []byte `json:"link,omitempty"`
	Err    string `json:"err,omitempty"`
	Detail string `json:"detail,omitempty"`
	Clicks uint64 `json:"clicks,omitempty"`
}

// legacyErrorName is err's name in the older protocol, which did not know
// deleted, unsupported or exhausted: they go as what they wrap.
func legacyErrorName(err error) (string, string) {
	code, detail := errorCode(err)
	switch {
	case code == 0:
		return "", ""
	case errors.Is(err, link.ErrDeleted):
		return "gone", detail
	case errors.Is(err, ErrUnsupported):
		return "unavailable", detail
	}
	for _, e := range errorCodes {
		if e.code == code && code < 14 {
			return e.name, detail
		}
	}
	return "internal", detail
}

// legacyError is the error of an older peer's answer.
func legacyError(name, detail string) error {
	if name == "" {
		return nil
	}
	for _, e := range errorCodes {
		if e.name == name {
			return errorOf(e.code, detail)
		}
	}
	return fmt.Errorf("remote error: %s", detail)
}

func encodeLink(l *link.Link) []byte {
	if l == nil {
		return nil
	}
	return command.EncodeLink(l)
}

func decodeLink(b []byte) (*link.Link, error) {
	if b == nil {
		return nil, nil
	}
	return command.DecodeLink(b)
}

// legacyOp converts one operation's messages to and from their JSON.
type legacyOp struct {
	name string
	// req and resp write a message into its JSON (req on the client, resp
	// on the server); fromReq and fromResp read one back.
	req      func(v any, j *legacyRequest)
	fromReq  func(j *legacyRequest) any
	resp     func(v any, j *legacyResponse)
	fromResp func(j *legacyResponse) (any, error)
}

var legacyOps = map[OpID]legacyOp{
	OpApply.ID: {name: OpApply.Name,
		req: func(v any, j *legacyRequest) {
			r := v.(*ApplyRequest)
			j.Group, j.Cmd, j.Hops = uint64(r.Group), r.Command, r.Hops
		},
		fromReq: func(j *legacyRequest) any {
			return &ApplyRequest{Group: command.GroupID(j.Group), Command: j.Cmd, Hops: j.Hops}
		},
		resp: func(v any, j *legacyResponse) {
			r := v.(*ApplyResponse)
			j.Leader, j.Link, j.LeaseStart, j.LeaseEnd, j.Placement, j.Claim = r.Leader, encodeLink(r.Link), r.LeaseStart, r.LeaseEnd, r.Placement, r.Claim
			for _, res := range r.Batch {
				var item legacyItem
				item.Err, item.Detail = legacyErrorName(res.Err)
				if res.Err == nil {
					item.Link = encodeLink(res.Link)
				}
				j.Batch = append(j.Batch, item)
			}
		},
		fromResp: func(j *legacyResponse) (any, error) {
			r := &ApplyResponse{Leader: j.Leader, LeaseStart: j.LeaseStart, LeaseEnd: j.LeaseEnd, Placement: j.Placement, Claim: j.Claim}
			var err error
			if r.Link, err = decodeLink(j.Link); err != nil {
				return nil, err
			}
			for _, item := range j.Batch {
				res := command.LinkResult{Err: legacyError(item.Err, item.Detail)}
				if res.Err == nil {
					if res.Link, err = decodeLink(item.Link); err != nil {
						return nil, err
					}
				}
				r.Batch = append(r.Batch, res)
			}
			return r, nil
		},
	},
	OpLookup.ID: {name: OpLookup.Name,
		req: func(v any, j *legacyRequest) {
			r := v.(*LookupRequest)
			j.Group, j.Code, j.Consistent, j.Hops = uint64(r.Shard), r.Code, r.Consistent, r.Hops
		},
		fromReq: func(j *legacyRequest) any {
			return &LookupRequest{Shard: command.ShardID(j.Group), Code: j.Code, Consistent: j.Consistent, Hops: j.Hops}
		},
		resp: func(v any, j *legacyResponse) { j.Link = encodeLink(v.(*LinkResponse).Link) },
		fromResp: func(j *legacyResponse) (any, error) {
			l, err := decodeLink(j.Link)
			return &LinkResponse{Link: l}, err
		},
	},
	OpClicks.ID: {name: OpClicks.Name,
		req: func(v any, j *legacyRequest) {
			r := v.(*ClicksRequest)
			j.Group, j.Code, j.From, j.To = uint64(r.Shard), r.Code, r.From.Unix(), r.To.Unix()
		},
		fromReq: func(j *legacyRequest) any {
			return &ClicksRequest{Shard: command.ShardID(j.Group), Code: j.Code, From: time.Unix(j.From, 0), To: time.Unix(j.To, 0)}
		},
		resp: func(v any, j *legacyResponse) {
			if st := v.(*ClicksResponse).Stats; st != nil {
				j.Clicks = st.AppendTo(nil)
			}
		},
		fromResp: func(j *legacyResponse) (any, error) {
			st := new(command.ClickStats)
			return &ClicksResponse{Stats: st}, st.Unmarshal(j.Clicks)
		},
	},
	OpVisits.ID: {name: OpVisits.Name,
		req: func(v any, j *legacyRequest) {
			r := v.(*VisitsRequest)
			j.Code, j.From, j.To, j.Limit = r.Code, r.From.UnixNano(), r.To.UnixNano(), r.Limit
		},
		fromReq: func(j *legacyRequest) any {
			return &VisitsRequest{Code: j.Code, From: time.Unix(0, j.From), To: time.Unix(0, j.To), Limit: j.Limit}
		},
		resp:     func(v any, j *legacyResponse) { j.Visits = v.(*VisitsResponse).Visits },
		fromResp: func(j *legacyResponse) (any, error) { return &VisitsResponse{Visits: j.Visits}, nil },
	},
	OpOrphans.ID: {name: OpOrphans.Name,
		req:     func(v any, j *legacyRequest) { j.Limit = v.(*OrphansRequest).Limit },
		fromReq: func(j *legacyRequest) any { return &OrphansRequest{Limit: j.Limit} },
		resp:    func(v any, j *legacyResponse) { j.Orphans = v.(*link.OrphanSummary) },
		fromResp: func(j *legacyResponse) (any, error) {
			if j.Orphans == nil {
				return &link.OrphanSummary{}, nil
			}
			return j.Orphans, nil
		},
	},
	OpList.ID: {name: OpList.Name,
		req: func(v any, j *legacyRequest) {
			r := v.(*ListRequest)
			j.Group, j.List, j.Hops = uint64(r.Shard), &r.Query, r.Hops
		},
		fromReq: func(j *legacyRequest) any {
			r := &ListRequest{Shard: command.ShardID(j.Group), Hops: j.Hops}
			if j.List != nil {
				r.Query = *j.List
			}
			return r
		},
		resp: func(v any, j *legacyResponse) {
			r := v.(*ListResponse)
			j.More, j.Stop, j.Counted = r.More, r.Stop, true
			for _, l := range r.Links {
				j.Batch = append(j.Batch, legacyItem{Link: encodeLink(l.Link), Clicks: l.Clicks})
			}
		},
		fromResp: func(j *legacyResponse) (any, error) {
			r := &ListResponse{More: j.More, Stop: j.Stop}
			for _, item := range j.Batch {
				l, err := decodeLink(item.Link)
				if err != nil {
					return nil, err
				}
				r.Links = append(r.Links, ListedLink{Link: l, Clicks: item.Clicks})
			}
			return r, nil
		},
	},
	OpTags.ID: {name: OpTags.Name,
		req: func(v any, j *legacyRequest) {
			r := v.(*TagsRequest)
			j.Group, j.Owner, j.Hops = uint64(r.Shard), r.Owner, r.Hops
		},
		fromReq: func(j *legacyRequest) any {
			return &TagsRequest{Shard: command.ShardID(j.Group), Owner: j.Owner, Hops: j.Hops}
		},
		resp: func(v any, j *legacyResponse) {
			j.Tags = map[string]uint64{}
			for _, t := range v.(*TagsResponse).Tags {
				j.Tags[t.Tag] = t.Links
			}
		},
		fromResp: func(j *legacyResponse) (any, error) {
			r := &TagsResponse{}
			for t, n := range j.Tags {
				r.Tags = append(r.Tags, link.TagCount{Tag: t, Links: n})
			}
			return r, nil
		},
	},
	OpPromise.ID: {name: OpPromise.Name,
		req:     func(v any, j *legacyRequest) { j.Code = v.(*PromiseRequest).Proposer },
		fromReq: func(j *legacyRequest) any { return &PromiseRequest{Proposer: j.Code} },
		resp: func(v any, j *legacyResponse) {
			r := v.(*PromiseResponse)
			j.Form, j.Detail = r.Answer, r.Holder
		},
		fromResp: func(j *legacyResponse) (any, error) { return &PromiseResponse{Answer: j.Form, Holder: j.Detail}, nil },
	},
	OpRelease.ID: {name: OpRelease.Name,
		req:     func(v any, j *legacyRequest) { j.Code = v.(*ReleaseRequest).Promiser },
		fromReq: func(j *legacyRequest) any { return &ReleaseRequest{Promiser: j.Code} },
		resp: func(v any, j *legacyResponse) {
			j.Form = PromiseRefused
			if v.(*ReleaseResponse).Released {
				j.Form = PromiseAccepted
			}
		},
		fromResp: func(j *legacyResponse) (any, error) {
			return &ReleaseResponse{Released: j.Form == PromiseAccepted}, nil
		},
	},
}

// ServeLegacy answers the older protocol's connections accepted from l,
// with the handlers of this protocol, as Serve does.
func (s *Server) ServeLegacy(ctx context.Context, l net.Listener) {
	s.accept(ctx, l, s.serveLegacyConn)
}

func (s *Server) serveLegacyConn(ctx context.Context, c net.Conn) {
	r, w := bufio.NewReader(c), bufio.NewWriter(c)
	for {
		_ = c.SetReadDeadline(time.Now().Add(IdleTimeout))
		frame, err := readFrame(r)
		if err != nil {
			return
		}
		var req legacyRequest
		if err := json.Unmarshal(frame, &req); err != nil {
			return
		}
		budget := time.Duration(req.TimeoutMS) * time.Millisecond
		if budget <= 0 || budget > maxBudget {
			budget = defaultBudget
		}
		rctx, cancel := context.WithTimeout(ctx, budget)
		resp := s.answerLegacy(rctx, &req)
		cancel()
		b, err := json.Marshal(resp)
		if err != nil {
			return
		}
		_ = c.SetWriteDeadline(time.Now().Add(writeTimeout))
		if err := writeFrame(w, b); err != nil {
			return
		}
	}
}

func (s *Server) answerLegacy(ctx context.Context, req *legacyRequest) (resp *legacyResponse) {
	resp = &legacyResponse{}
	for id, op := range legacyOps {
		if op.name != req.Op {
			continue
		}
		h, ok := s.handler(id)
		if !ok {
			break
		}
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("peer request handler panicked", "op", h.name, "panic", p)
				resp = &legacyResponse{Err: "internal", Detail: "internal error"}
			}
		}()
		out, err := h.call(ctx, op.fromReq(req))
		if err != nil {
			resp.Err, resp.Detail = legacyErrorName(err)
			return resp
		}
		op.resp(out, resp)
		return resp
	}
	resp.Err, resp.Detail = "internal", fmt.Sprintf("unknown rpc op %q", req.Op)
	return resp
}

// legacyCall is Call in the older protocol.
func legacyCall[Resp any](ctx context.Context, c *Client, addr string, op OpID, req any) (*Resp, error) {
	lop, ok := legacyOps[op]
	if !ok || c.cfg.DialLegacy == nil {
		return nil, fmt.Errorf("%w: %s speaks an older protocol", ErrUnsupported, addr)
	}
	j := legacyRequest{Op: lop.name}
	lop.req(req, &j)
	key := "legacy " + addr
	ic, err := c.getLegacy(ctx, key, addr)
	if err != nil {
		return nil, err
	}
	var jr legacyResponse
	var merr error
	err = c.exchange(ctx, key, addr, ic, func(budget time.Duration) []byte {
		j.TimeoutMS = max(budget.Milliseconds(), 1)
		var body []byte
		body, merr = json.Marshal(&j)
		return body
	}, func(frame []byte) error { return json.Unmarshal(frame, &jr) })
	if merr != nil {
		return nil, merr
	}
	if err != nil {
		return nil, err
	}
	if err := legacyError(jr.Err, jr.Detail); err != nil {
		return nil, err
	}
	out, err := lop.fromResp(&jr)
	if err != nil {
		return nil, fmt.Errorf("%w: %s answer of %s: %w", link.ErrUnavailable, lop.name, addr, err)
	}
	return out.(*Resp), nil
}

// getLegacy returns an idle connection of the older protocol, or a new one.
func (c *Client) getLegacy(ctx context.Context, key, addr string) (idleConn, error) {
	if ic, ok, err := c.takeIdle(key); ok || err != nil {
		return ic, err
	}
	conn, err := c.cfg.DialLegacy(ctx, addr)
	if err != nil {
		return idleConn{}, fmt.Errorf("%w: dial %s: %w", ErrUnreachable, addr, err)
	}
	return idleConn{conn: conn, r: bufio.NewReader(conn), w: bufio.NewWriter(conn)}, nil
}
