package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/peertls"
	"github.com/linkraft/linkraft/link"
	"github.com/linkraft/linkraft/transport"
)

// The internal RPC runs on the peer port (transport.KindRPC): one request
// and one response at a time per connection, each a 4-byte big-endian length
// and a JSON document. It carries forwarded writes and lookups on a leader
// or replica; nothing internal is on the HTTP port.

const (
	opApply   = "apply"
	opLookup  = "lookup"
	opClicks  = "clicks"
	opVisits  = "visits"
	opOrphans = "orphans"
	// opList is one shard's part of a listing (list.go).
	opList = "list"
	// opTags is one shard's tag counts (list.go).
	opTags = "tags"
	// formation (formation.go): Code carries the asking node's ID.
	opFormPromise = "form-promise"
	opFormRelease = "form-release"

	maxFrame       = 1 << 20
	rpcIdleTimeout = 2 * time.Minute
)

type rpcRequest struct {
	Op         string `json:"op"`
	Group      uint64 `json:"group"`
	Cmd        []byte `json:"cmd,omitempty"`
	Code       string `json:"code,omitempty"`
	Consistent bool   `json:"consistent,omitempty"`
	Hops       int    `json:"hops,omitempty"`
	TimeoutMS  int64  `json:"timeout_ms,omitempty"`
	From       int64  `json:"from,omitempty"` // clicks: Unix seconds; visits: Unix nanoseconds
	To         int64  `json:"to,omitempty"`
	Limit      int    `json:"limit,omitempty"`
	// List is opList's query.
	List *link.ListQuery `json:"list,omitempty"`
	// Owner is opTags' owner (empty: every owner).
	Owner string `json:"owner,omitempty"`
}

type rpcResponse struct {
	Link       []byte              `json:"link,omitempty"`
	Err        string              `json:"err,omitempty"`
	Detail     string              `json:"detail,omitempty"`
	LeaseStart uint64              `json:"lease_start,omitempty"`
	LeaseEnd   uint64              `json:"lease_end,omitempty"`
	Placement  *command.Placement  `json:"placement,omitempty"`
	Clicks     []byte              `json:"clicks,omitempty"`
	Visits     []link.Visit        `json:"visits,omitempty"`
	Orphans    *link.OrphanSummary `json:"orphans,omitempty"`
	Batch      []rpcItem           `json:"batch,omitempty"`
	Form       string              `json:"form,omitempty"` // formation answer
	// Leader is the peer address of the leader that applied an opApply.
	Leader string `json:"leader,omitempty"`
	// More says an opList answer may have more links past its last.
	More bool `json:"more,omitempty"`
	// Counted says an opList answer's items carry their human clicks (a
	// version before it sends none).
	Counted bool `json:"counted,omitempty"`
	// Stop is where an opList answer's scan ran out (link.ListQuery.Scan).
	Stop *link.ListPosition `json:"stop,omitempty"`
	// Tags is an opTags answer.
	Tags map[string]uint64 `json:"tags,omitempty"`
	// Claim is a ClaimKey's answer.
	Claim *command.ClaimResult `json:"claim,omitempty"`
}

// rpcItem is one answer of a CreateBatch (the link or an error), or one
// link of a listing.
type rpcItem struct {
	Link   []byte `json:"link,omitempty"`
	Err    string `json:"err,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Clicks is a listed link's human clicks (opList).
	Clicks uint64 `json:"clicks,omitempty"`
}

// error kinds on the wire
var wireErrors = []struct {
	code string
	err  error
}{
	{"not-found", link.ErrNotFound},
	{"gone", link.ErrGone},
	{"alias-taken", link.ErrAliasTaken},
	{"not-leader", link.ErrNotLeader},
	{"unavailable", link.ErrUnavailable},
	{"stale-placement", command.ErrStalePlacement},
	{"invalid-input", link.ErrInvalidInput},
	{"insufficient-storage", link.ErrInsufficientStorage},
	{"key-not-found", command.ErrKeyNotFound},
	{"key-exists", command.ErrKeyExists},
	{"first-key-made", command.ErrFirstKeyMade},
}

func errToWire(err error) (string, string) {
	if err == nil {
		return "", ""
	}
	for _, w := range wireErrors {
		if errors.Is(err, w.err) {
			return w.code, err.Error()
		}
	}
	return "internal", err.Error()
}

func errFromWire(code, detail string) error {
	if code == "" {
		return nil
	}
	for _, w := range wireErrors {
		if w.code == code {
			if detail == "" || detail == w.err.Error() {
				return w.err
			}
			return fmt.Errorf("%w (remote: %s)", w.err, detail)
		}
	}
	return fmt.Errorf("remote error: %s", detail)
}

func writeFrame(w *bufio.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(b)))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	return w.Flush()
}

func readFrame(r *bufio.Reader, v any) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxFrame {
		return fmt.Errorf("rpc frame of %d bytes is over the limit", n)
	}
	// The buffer grows with the bytes that arrive, not with the length
	// announced: a peer that announces a megabyte and sends nine bytes
	// holds nine bytes of this node's memory.
	var buf bytes.Buffer
	if got, err := buf.ReadFrom(io.LimitReader(r, int64(n))); err != nil {
		return err
	} else if got != int64(n) {
		return io.ErrUnexpectedEOF
	}
	return json.Unmarshal(buf.Bytes(), v)
}

// serveRPC accepts internal RPC connections until the layer closes.
func (n *Node) serveRPC(l *transport.Layer) {
	defer n.rpcWG.Done()
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		conns.Add(1)
		go func() {
			defer conns.Done()
			n.serveRPCConn(c)
		}()
	}
}

func (n *Node) serveRPCConn(c net.Conn) {
	defer c.Close()
	stop := context.AfterFunc(n.lifetime, func() { _ = c.Close() })
	defer stop()
	r, w := bufio.NewReader(c), bufio.NewWriter(c)
	for {
		_ = c.SetReadDeadline(time.Now().Add(rpcIdleTimeout))
		var req rpcRequest
		if err := readFrame(r, &req); err != nil {
			return
		}
		timeout := time.Duration(req.TimeoutMS) * time.Millisecond
		if timeout <= 0 || timeout > 30*time.Second {
			timeout = 10 * time.Second
		}
		ctx, cancel := context.WithTimeout(n.lifetime, timeout)
		resp := n.handleRPC(ctx, &req)
		cancel()
		_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if err := writeFrame(w, resp); err != nil {
			return
		}
	}
}

func (n *Node) handleRPC(ctx context.Context, req *rpcRequest) *rpcResponse {
	resp := &rpcResponse{}
	fail := func(err error) *rpcResponse {
		resp.Err, resp.Detail = errToWire(err)
		return resp
	}
	switch req.Op {
	case opApply:
		if err := forwardable(req.Group, req.Cmd); err != nil {
			return fail(err)
		}
		r, err := n.applyGroup(ctx, req.Group, req.Cmd, req.Hops)
		if r != nil {
			resp.Placement = r.placement
		}
		if err != nil {
			return fail(err)
		}
		resp.LeaseStart, resp.LeaseEnd, resp.Leader, resp.Claim = r.leaseStart, r.leaseEnd, r.leader, r.claim
		if r.link != nil {
			resp.Link = command.EncodeLink(r.link)
		}
		if r.batch != nil {
			resp.Batch = make([]rpcItem, len(r.batch))
			for i, res := range r.batch {
				if res.Err != nil {
					resp.Batch[i].Err, resp.Batch[i].Detail = errToWire(res.Err)
				} else {
					resp.Batch[i].Link = command.EncodeLink(res.Link)
				}
			}
		}
	case opLookup:
		l, err := n.lookupShard(ctx, int(req.Group), req.Code, req.Consistent, req.Hops)
		if err != nil {
			return fail(err)
		}
		resp.Link = command.EncodeLink(l)
	case opClicks:
		sh := n.localShard(int(req.Group))
		if sh == nil {
			return fail(fmt.Errorf("%w: shard %d is not hosted here", link.ErrUnavailable, req.Group))
		}
		st, err := sh.FSM().Clicks(req.Code, time.Unix(req.From, 0), time.Unix(req.To, 0))
		if err != nil {
			return fail(err)
		}
		resp.Clicks = st.AppendTo(nil)
	case opVisits:
		v, err := n.localVisits(req.Code, time.Unix(0, req.From), time.Unix(0, req.To), req.Limit)
		if err != nil {
			return fail(err)
		}
		resp.Visits = v
	case opOrphans:
		o := n.localOrphans(req.Limit)
		resp.Orphans = &o
	case opList:
		if err := n.serveList(ctx, req, resp); err != nil {
			return fail(err)
		}
	case opTags:
		if req.Group >= uint64(n.ring.Shards()) {
			return fail(fmt.Errorf("%w: no shard %d", link.ErrInvalidInput, req.Group))
		}
		tags, err := n.tagsShard(ctx, int(req.Group), req.Owner, req.Hops)
		if err != nil {
			return fail(err)
		}
		resp.Tags = tags
	case opFormPromise:
		answer, holder, err := n.promise(ctx, req.Code)
		if err != nil {
			return fail(err)
		}
		resp.Form, resp.Detail = answer, holder
	case opFormRelease:
		resp.Form = formRefused
		if n.release(req.Code) {
			resp.Form = formAccepted
		}
	default:
		return fail(fmt.Errorf("unknown rpc op %q", req.Op))
	}
	return resp
}

// errDial is wrapped by call's error when the peer was never reached:
// nothing was sent, so another peer may be tried.
var errDial = fmt.Errorf("%w: peer not reachable", link.ErrUnavailable)

// rpcClient keeps a few idle connections per peer.
type rpcClient struct {
	mux    *transport.Mux // dials peers (with the node's peer TLS)
	mu     sync.Mutex
	idle   map[string][]idleConn
	closed bool
}

type idleConn struct {
	conn  net.Conn
	since time.Time
}

const (
	maxIdlePerPeer = 16
	// maxIdleAge keeps pooled connections well inside the server's idle
	// timeout, so a reused connection is not one the server just closed.
	maxIdleAge = rpcIdleTimeout / 2
)

func (c *rpcClient) get(ctx context.Context, addr string) (net.Conn, error) {
	c.mu.Lock()
	for conns := c.idle[addr]; len(conns) > 0; conns = c.idle[addr] {
		ic := conns[len(conns)-1]
		c.idle[addr] = conns[:len(conns)-1]
		if time.Since(ic.since) < maxIdleAge {
			c.mu.Unlock()
			return ic.conn, nil
		}
		_ = ic.conn.Close()
	}
	c.mu.Unlock()
	conn, err := c.mux.Dial(ctx, addr, transport.KindRPC, 0, 2*time.Second)
	if err != nil {
		return nil, fmt.Errorf("%w: dial %s: %w", errDial, addr, err)
	}
	return conn, nil
}

func (c *rpcClient) put(addr string, conn net.Conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || len(c.idle[addr]) >= maxIdlePerPeer {
		_ = conn.Close()
		return
	}
	if c.idle == nil {
		c.idle = make(map[string][]idleConn)
	}
	c.idle[addr] = append(c.idle[addr], idleConn{conn: conn, since: time.Now()})
}

func (c *rpcClient) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, conns := range c.idle {
		for _, ic := range conns {
			_ = ic.conn.Close()
		}
	}
	c.idle = nil
}

// call sends req to the node at addr. A transport failure is
// link.ErrUnavailable: the request may or may not have been executed.
func (c *rpcClient) call(ctx context.Context, addr string, req *rpcRequest) (*rpcResponse, error) {
	if dl, ok := ctx.Deadline(); ok {
		req.TimeoutMS = max(time.Until(dl).Milliseconds(), 1)
	}
	conn, err := c.get(ctx, addr)
	if err != nil {
		return nil, err
	}
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(15 * time.Second)
	}
	_ = conn.SetDeadline(dl.Add(time.Second))
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	r, w := bufio.NewReader(conn), bufio.NewWriter(conn)
	var resp rpcResponse
	if err := writeFrame(w, req); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("%w: rpc to %s: %w", link.ErrUnavailable, addr, err)
	}
	if err := readFrame(r, &resp); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("%w: rpc to %s: %w", link.ErrUnavailable, addr, err)
	}
	if !stop() { // the context fired: the deadline may be poisoned
		_ = conn.Close()
	} else {
		_ = conn.SetDeadline(time.Time{})
		c.put(addr, conn)
	}
	return &resp, nil
}

// verifyPeerRPC holds a Raft request to the node ID that its connection's
// certificate names: a member may speak only for itself.
func verifyPeerRPC(conn net.Conn, h raft.RPCHeader) error {
	id, ok := peertls.PeerNodeID(transport.PeerConn(conn))
	if !ok {
		return fmt.Errorf("%w: connection is not authenticated", peertls.ErrPeer)
	}
	if string(h.ID) != id {
		return fmt.Errorf("%w: certificate of %q sent a request as %q", peertls.ErrPeer, id, h.ID)
	}
	return nil
}

// forwardable refuses, on the RPC, the commands no node ever forwards: the
// cluster settings and the member registry are written by the meta leader
// itself (ensureSettings, admit), so a peer asking for them is not a
// linknode doing its job. What may be forwarded (shard commands, ID leases,
// placements) is then decoded and validated like any proposal.
func forwardable(group uint64, cmd []byte) error {
	if group != metaGroupID || len(cmd) == 0 {
		return nil
	}
	switch t := command.Type(cmd[0]); t {
	case command.TypeSetSettings, command.TypeRegisterNode, command.TypeAdmitNode:
		return fmt.Errorf("%w: %s commands are not taken over the RPC", link.ErrInvalidInput, command.Name(t))
	case command.TypeCreateKey:
		// Keys made through the API may be forwarded; the first admin
		// key is made by the meta leader itself.
		if command.IsFirstKey(cmd) {
			return fmt.Errorf("%w: the first admin key is not taken over the RPC", link.ErrInvalidInput)
		}
	}
	return nil
}
