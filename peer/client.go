package peer

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/linkraft/linkraft/link"
)

// Dialer opens a connection to the node whose peer address is addr.
type Dialer func(ctx context.Context, addr string) (net.Conn, error)

// ClientConfig configures a Client.
type ClientConfig struct {
	// Dial opens a connection of this protocol (transport.KindPeer).
	Dial Dialer
	// DialLegacy, if set, opens a connection of the protocol before this
	// one (transport.KindRPC, JSON): the client speaks it to a peer that
	// closes the connection at the hello (legacy.go).
	DialLegacy Dialer
}

// Client calls peers, keeping a few idle connections to each.
type Client struct {
	cfg    ClientConfig
	mu     sync.Mutex
	idle   map[string][]idleConn
	legacy map[string]time.Time // peers that spoke the older protocol, until when
	closed bool
}

type idleConn struct {
	conn  net.Conn
	r     *bufio.Reader
	w     *bufio.Writer
	since time.Time
}

const (
	maxIdlePerPeer = 16
	// maxIdleAge keeps pooled connections well inside the server's idle
	// timeout, so a reused connection is not one the server just closed.
	maxIdleAge = IdleTimeout / 2
	// legacyFor is how long a peer found speaking the older protocol is
	// called in it before this protocol is tried again (it may have been
	// upgraded).
	legacyFor = time.Minute
	// helloTimeout bounds a new connection's hello.
	helloTimeout = 5 * time.Second
)

// NewClient returns a Client.
func NewClient(cfg ClientConfig) *Client {
	return &Client{cfg: cfg, idle: map[string][]idleConn{}, legacy: map[string]time.Time{}}
}

// Close closes the idle connections; calls after it fail.
func (c *Client) Close() {
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

// Call sends req for op to the node at addr and returns its response. An
// error the peer answered is its sentinel (errors.go); ErrUnreachable
// means nothing was sent; any other failure of the connection is
// link.ErrUnavailable: the request may or may not have been done.
func Call[Req, Resp any](ctx context.Context, c *Client, addr string, op Op[Req, Resp], req *Req) (*Resp, error) {
	if c.isLegacy(addr) {
		return legacyCall[Resp](ctx, c, addr, op.ID, req)
	}
	ic, legacy, err := c.get(ctx, addr)
	if legacy {
		return legacyCall[Resp](ctx, c, addr, op.ID, req)
	}
	if err != nil {
		return nil, err
	}
	env := envelope{Op: op.ID, Body: op.req.Append(nil, req)}
	rep, err := c.roundTrip(ctx, addr, ic, &env)
	if err != nil {
		return nil, err
	}
	if err := errorOf(rep.Code, rep.Detail); err != nil {
		return nil, err
	}
	resp, err := op.resp.Decode(rep.Body)
	if err != nil {
		return nil, fmt.Errorf("%w: %s answer of %s: %w", link.ErrUnavailable, op.Name, addr, err)
	}
	return resp, nil
}

// roundTrip sends env on ic and reads the reply, within ctx; the
// connection goes back to the pool if it is still good.
func (c *Client) roundTrip(ctx context.Context, addr string, ic idleConn, env *envelope) (*reply, error) {
	var rep reply
	err := c.exchange(ctx, addr, addr, ic, func(budget time.Duration) []byte {
		env.BudgetMS = uint64(max(budget.Milliseconds(), 1))
		return envelopeCodec.Append(nil, env)
	}, func(frame []byte) error { return replyCodec.DecodeInto(frame, &rep) })
	if err != nil {
		return nil, err
	}
	return &rep, nil
}

// exchange writes the frame body(the time left) on ic and reads one frame
// into read, within ctx, and puts ic back in the pool under key (or closes
// it when it may not be good). A failure is link.ErrUnavailable: the
// request may or may not have been done.
func (c *Client) exchange(ctx context.Context, key, addr string, ic idleConn, body func(budget time.Duration) []byte, read func([]byte) error) error {
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(15 * time.Second)
	}
	_ = ic.conn.SetDeadline(dl.Add(time.Second))
	stop := context.AfterFunc(ctx, func() { _ = ic.conn.SetDeadline(time.Now()) })
	defer stop()
	err := writeFrame(ic.w, body(time.Until(dl)))
	var frame []byte
	if err == nil {
		frame, err = readFrame(ic.r)
	}
	if err == nil {
		err = read(frame)
	}
	if err != nil {
		_ = ic.conn.Close()
		return fmt.Errorf("%w: rpc to %s: %w", link.ErrUnavailable, addr, err)
	}
	if !stop() { // the context fired: the deadline may be poisoned
		_ = ic.conn.Close()
	} else {
		_ = ic.conn.SetDeadline(time.Time{})
		c.put(key, ic)
	}
	return nil
}

// get returns an idle connection to addr, or a new one past its hello.
// legacy reports a peer that closed the connection at the hello: a
// version before this protocol.
func (c *Client) get(ctx context.Context, addr string) (ic idleConn, legacy bool, err error) {
	if ic, ok, err := c.takeIdle(addr); ok || err != nil {
		return ic, false, err
	}
	conn, err := c.cfg.Dial(ctx, addr)
	if err != nil {
		return idleConn{}, false, fmt.Errorf("%w: dial %s: %w", ErrUnreachable, addr, err)
	}
	ic = idleConn{conn: conn, r: bufio.NewReader(conn), w: bufio.NewWriter(conn)}
	if err := c.hello(ctx, ic); err != nil {
		_ = conn.Close()
		if c.cfg.DialLegacy != nil {
			c.mu.Lock()
			c.legacy[addr] = time.Now().Add(legacyFor)
			c.mu.Unlock()
			return idleConn{}, true, nil
		}
		return idleConn{}, false, fmt.Errorf("%w: hello to %s: %w", ErrUnreachable, addr, err)
	}
	return ic, false, nil
}

// hello opens the connection: nothing but the hello was sent when it
// fails, so the caller may go elsewhere.
func (c *Client) hello(ctx context.Context, ic idleConn) error {
	dl := time.Now().Add(helloTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	_ = ic.conn.SetDeadline(dl)
	defer ic.conn.SetDeadline(time.Time{})
	env := envelope{Op: opHello.ID, Body: helloCodec.Append(nil, &Hello{Version: ProtocolVersion})}
	if err := writeFrame(ic.w, envelopeCodec.Append(nil, &env)); err != nil {
		return err
	}
	frame, err := readFrame(ic.r)
	if err != nil {
		return err
	}
	var rep reply
	if err := replyCodec.DecodeInto(frame, &rep); err != nil {
		return err
	}
	if err := errorOf(rep.Code, rep.Detail); err != nil {
		return err
	}
	var h Hello
	return helloCodec.DecodeInto(rep.Body, &h)
}

// takeIdle returns the newest idle connection under key that is young
// enough to trust, closing older ones; ok is false when there is none.
func (c *Client) takeIdle(key string) (ic idleConn, ok bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return idleConn{}, false, fmt.Errorf("%w: client closed", ErrUnreachable)
	}
	for conns := c.idle[key]; len(conns) > 0; conns = c.idle[key] {
		ic := conns[len(conns)-1]
		c.idle[key] = conns[:len(conns)-1]
		// A peer that restarted (or closed the connection) since it was
		// pooled: the call would find EOF with its request written, an
		// outcome it could not tell from a peer that died mid-way.
		if time.Since(ic.since) < maxIdleAge && !closedByPeer(ic.conn) {
			return ic, true, nil
		}
		_ = ic.conn.Close()
	}
	return idleConn{}, false, nil
}

// closedByPeer reports whether an idle connection has anything to read:
// its peer's end of file (it closed or restarted), or bytes no request
// asked for; either way the connection is not to be used. It peeks at the
// socket without blocking (a TLS connection's underneath it); a connection
// that is not a socket is taken as open.
func closedByPeer(c net.Conn) bool {
	for {
		inner, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = inner.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	_ = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = err != syscall.EAGAIN && err != syscall.EWOULDBLOCK
		return true // done: never wait for readiness
	})
	return closed
}

// put keeps ic as an idle connection under addr, or closes it when the
// pool is full or the client closed.
func (c *Client) put(addr string, ic idleConn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || len(c.idle[addr]) >= maxIdlePerPeer {
		_ = ic.conn.Close()
		return
	}
	ic.since = time.Now()
	c.idle[addr] = append(c.idle[addr], ic)
}

// isLegacy reports whether addr spoke the older protocol lately.
func (c *Client) isLegacy(addr string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	until, ok := c.legacy[addr]
	if ok && time.Now().After(until) {
		delete(c.legacy, addr)
		return false
	}
	return ok
}
