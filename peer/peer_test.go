package peer

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/certfile/certtest"
	"github.com/linkraft/linkraft/internal/testkit"
	"github.com/linkraft/linkraft/link"
)

// listen serves s on a loopback listener (the new protocol, or the legacy
// one) until the test ends, and returns its address.
func listen(t *testing.T, serve func(context.Context, net.Listener)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); ln.Close(); <-done })
	return ln.Addr().String()
}

func tcpDial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// server returns a Server that answers lookups of "abc" with lk and of
// "gone" with link.ErrDeleted, and applies by echoing the group.
func server() *Server {
	s := NewServer(ServerConfig{})
	Handle(s, OpLookup, func(_ context.Context, r *LookupRequest) (*LinkResponse, error) {
		switch r.Code {
		case "abc":
			return &LinkResponse{Link: lk}, nil
		case "gone":
			return nil, link.ErrDeleted
		case "panic":
			panic("handler bug")
		}
		return nil, link.ErrNotFound
	})
	Handle(s, OpApply, func(_ context.Context, r *ApplyRequest) (*ApplyResponse, error) {
		return &ApplyResponse{Leader: "leader-of-" + r.Group.String(), Batch: []command.LinkResult{{Link: lk}, {Err: link.ErrAliasTaken}}}, nil
	})
	return s
}

func TestCallAnswersAndErrors(t *testing.T) {
	t.Parallel()
	addr := listen(t, server().Serve)
	c := NewClient(ClientConfig{Dial: tcpDial})
	defer c.Close()
	ctx := testkit.Context(t, 10*time.Second)
	l, err := c.Lookup(ctx, addr, 1, "abc", false, 0)
	if err != nil || l.Code != "abc" || l.Version != lk.Version {
		t.Fatalf("lookup: %+v, %v", l, err)
	}
	// The sentinels come back as they were: a deleted link is not merely
	// gone, and a miss is not found.
	if _, err := c.Lookup(ctx, addr, 1, "gone", false, 0); err != link.ErrDeleted {
		t.Fatalf("deleted: %v", err)
	}
	if _, err := c.Lookup(ctx, addr, 1, "nope", false, 0); err != link.ErrNotFound {
		t.Fatalf("unknown: %v", err)
	}
	r, err := c.Apply(ctx, addr, command.ShardID(2).Group(), []byte{1}, 0)
	if err != nil || r.Leader != "leader-of-shard-2" || r.Batch[0].Link.Code != "abc" || !errors.Is(r.Batch[1].Err, link.ErrAliasTaken) {
		t.Fatalf("apply: %+v, %v", r, err)
	}
	// A handler's panic is an internal error, and the server goes on.
	if _, err := c.Lookup(ctx, addr, 1, "panic", false, 0); err == nil || errors.Is(err, link.ErrUnavailable) {
		t.Fatalf("panicking handler: %v", err)
	}
	if _, err := c.Lookup(ctx, addr, 1, "abc", false, 0); err != nil {
		t.Fatalf("after the panic: %v", err)
	}
}

// TestUnknownOperationIsUnsupported: an operation the peer's version does
// not register is answered ErrUnsupported, which the caller reads as
// "nothing was done" (NotDone), never as a crash or an empty answer.
func TestUnknownOperationIsUnsupported(t *testing.T) {
	t.Parallel()
	addr := listen(t, server().Serve)
	c := NewClient(ClientConfig{Dial: tcpDial})
	defer c.Close()
	_, err := c.Tags(testkit.Context(t, 10*time.Second), addr, 0, "", 0)
	if !errors.Is(err, ErrUnsupported) || !NotDone(err) || !errors.Is(err, link.ErrUnavailable) {
		t.Fatalf("an operation the peer lacks: %v", err)
	}
	future := Op[Hello, Hello]{ID: 999, Name: "future", req: helloCodec, resp: helloCodec}
	if _, err := Call(testkit.Context(t, 10*time.Second), c, addr, future, &Hello{}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("operation 999: %v", err)
	}
}

// TestUnreachablePeerIsNotDone: a peer that cannot be dialled was never
// asked anything.
func TestUnreachablePeerIsNotDone(t *testing.T) {
	t.Parallel()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	c := NewClient(ClientConfig{Dial: tcpDial})
	_, err := c.Lookup(testkit.Context(t, 5*time.Second), addr, 0, "abc", false, 0)
	if !errors.Is(err, ErrUnreachable) || !NotDone(err) {
		t.Fatalf("%v", err)
	}
}

// TestRequestsBeforeTheHelloAreRefused: a connection must open with the
// hello; one that sends a request first is closed unanswered.
func TestRequestsBeforeTheHelloAreRefused(t *testing.T) {
	t.Parallel()
	addr := listen(t, server().Serve)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	w := bufio.NewWriter(conn)
	env := envelope{Op: OpLookup.ID, Body: OpLookup.req.Append(nil, &LookupRequest{Code: "abc"})}
	if err := writeFrame(w, envelopeCodec.Append(nil, &env)); err != nil {
		t.Fatal(err)
	}
	if _, err := readFrame(bufio.NewReader(conn)); err == nil {
		t.Fatal("a request without a hello was answered")
	}
}

// TestFrameFloodHoldsOnlyWhatArrives: 1,000 frames that announce the
// largest size and send nine bytes cost what arrived, not what was
// announced.
func TestFrameFloodHoldsOnlyWhatArrives(t *testing.T) {
	frame := binary.BigEndian.AppendUint32(nil, MaxFrame)
	frame = append(frame, "123456789"...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 1000 {
		if _, err := readFrame(bufio.NewReader(bytes.NewReader(frame))); err == nil {
			t.Fatal("a truncated frame was read")
		}
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
		t.Fatalf("1,000 truncated frames allocated %d MB", got>>20)
	}
}

// TestLegacyPeersBothWays: during a rolling upgrade from the version
// before this protocol, a node of that version (its JSON protocol, as it
// framed it) is answered, and a call to such a node (it closes this
// protocol's connections at the hello) goes out in its protocol, with the
// same answers and errors.
func TestLegacyPeersBothWays(t *testing.T) {
	t.Parallel()
	s := server()
	legacyAddr := listen(t, s.ServeLegacy)
	// An older node's request, as its rpcClient wrote it.
	conn, err := net.Dial("tcp", legacyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	w, r := bufio.NewWriter(conn), bufio.NewReader(conn)
	for _, c := range []struct {
		req     string
		wantErr string
	}{
		{`{"op":"lookup","group":1,"code":"abc"}`, ""},
		{`{"op":"lookup","group":1,"code":"gone"}`, "gone"},
		{`{"op":"tags","group":1}`, "internal"},
		{`{"op":"no-such-op"}`, "internal"},
	} {
		if err := writeFrame(w, []byte(c.req)); err != nil {
			t.Fatal(err)
		}
		frame, err := readFrame(r)
		if err != nil {
			t.Fatal(err)
		}
		var resp legacyResponse
		if err := json.Unmarshal(frame, &resp); err != nil {
			t.Fatal(err)
		}
		if resp.Err != c.wantErr {
			t.Fatalf("%s: err %q (%s), want %q", c.req, resp.Err, resp.Detail, c.wantErr)
		}
		if c.wantErr == "" {
			if l, err := command.DecodeLink(resp.Link); err != nil || l.Code != "abc" {
				t.Fatalf("%s: link %v, %v", c.req, l, err)
			}
		}
	}

	// A node of the older version: its peer port closes a connection of
	// a kind it does not know (this protocol's) at once.
	var refused atomic.Int64
	oldPort := listen(t, func(ctx context.Context, ln net.Listener) {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			refused.Add(1)
			c.Close()
		}
	})
	cl := NewClient(ClientConfig{Dial: func(ctx context.Context, addr string) (net.Conn, error) { return tcpDial(ctx, oldPort) },
		DialLegacy: func(ctx context.Context, addr string) (net.Conn, error) { return tcpDial(ctx, legacyAddr) }})
	defer cl.Close()
	ctx := testkit.Context(t, 10*time.Second)
	for range 3 {
		if l, err := cl.Lookup(ctx, "old-node", 1, "abc", false, 0); err != nil || l.Code != "abc" {
			t.Fatalf("lookup on an older node: %v, %v", l, err)
		}
	}
	if _, err := cl.Lookup(ctx, "old-node", 1, "gone", false, 0); !errors.Is(err, link.ErrGone) {
		t.Fatalf("deleted on an older node: %v", err)
	}
	a, err := cl.Apply(ctx, "old-node", 3, []byte{1}, 0)
	if err != nil || a.Leader != "leader-of-shard-2" || !errors.Is(a.Batch[1].Err, link.ErrAliasTaken) {
		t.Fatalf("apply on an older node: %+v, %v", a, err)
	}
	if n := refused.Load(); n != 1 {
		t.Fatalf("this protocol was tried %d times on the older node, want once (then remembered)", n)
	}
}

// TestHelloIsTheseBytes: the chaos harness's hostile peers (jepsen
// hostile.go) send this frame as a stranger and expect no answer; a member
// sending it must get one, or that attack proves nothing.
func TestHelloIsTheseBytes(t *testing.T) {
	t.Parallel()
	addr := listen(t, server().Serve)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte{0, 0, 0, 4, 0x1a, 0x02, 0x08, 0x01}); err != nil {
		t.Fatal(err)
	}
	frame, err := readFrame(bufio.NewReader(conn))
	if err != nil {
		t.Fatalf("no answer to the hello: %v", err)
	}
	var rep reply
	var h Hello
	if err := replyCodec.DecodeInto(frame, &rep); err != nil || rep.Code != 0 || helloCodec.DecodeInto(rep.Body, &h) != nil || h.Version != ProtocolVersion {
		t.Fatalf("hello answered %+v (%v)", rep, err)
	}
}

// TestClosedPooledConnectionIsNotUsed: a pooled connection is used again
// while its peer lives (one dial for many calls); once the peer has closed
// it (a restart: the old process's connections close), the next call
// dials instead of writing into the dead connection, so a peer that is
// down is ErrUnreachable (nothing was sent) and not an EOF after the
// request went out (an unknown outcome), and a restarted one is simply
// called.
func TestClosedPooledConnectionIsNotUsed(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var conns []net.Conn
	tracked := &trackingListener{Listener: ln, add: func(c net.Conn) { mu.Lock(); conns = append(conns, c); mu.Unlock() }}
	done := make(chan struct{})
	go func() { defer close(done); server().Serve(ctx, tracked) }()
	var dials atomic.Int32
	c := NewClient(ClientConfig{Dial: func(ctx context.Context, a string) (net.Conn, error) { dials.Add(1); return tcpDial(ctx, a) }})
	defer c.Close()
	tctx := testkit.Context(t, 10*time.Second)
	for range 5 {
		if _, err := c.Lookup(tctx, addr, 1, "abc", false, 0); err != nil {
			t.Fatal(err)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("%d dials for 5 calls to a live peer, want 1 (the pool)", n)
	}
	// The peer's process ends: its listener and every connection close.
	cancel()
	ln.Close()
	<-done
	mu.Lock()
	for _, c := range conns {
		c.Close()
	}
	mu.Unlock()
	testkit.WaitFor(t, 5*time.Second, "the pooled connection's end of file to arrive", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.idle[addr]) == 1 && closedByPeer(c.idle[addr][0].conn)
	})
	if _, err := c.Lookup(tctx, addr, 1, "abc", false, 0); !errors.Is(err, ErrUnreachable) || !NotDone(err) {
		t.Fatalf("a call to the stopped peer: %v, want ErrUnreachable (a dial, nothing sent)", err)
	}
	if n := dials.Load(); n != 2 {
		t.Fatalf("%d dials, want 2", n)
	}
}

// TestPooledTLSConnectionIsReused: over TLS 1.3 (the peer port's; the
// server sends session tickets after the handshake) an idle connection has
// nothing left to read once a call has been answered, so the pool's check
// keeps it: one dial for many calls.
func TestPooledTLSConnectionIsReused(t *testing.T) {
	t.Parallel()
	certFile, keyFile, _ := certtest.Write(t, t.TempDir(), 1)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	addr := listen(t, func(ctx context.Context, ln net.Listener) {
		server().Serve(ctx, tls.NewListener(ln, &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}}))
	})
	var dials atomic.Int32
	c := NewClient(ClientConfig{Dial: func(ctx context.Context, a string) (net.Conn, error) {
		dials.Add(1)
		d := tls.Dialer{Config: &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true}} //nolint:gosec // a test's own certificate
		return d.DialContext(ctx, "tcp", a)
	}})
	defer c.Close()
	ctx := testkit.Context(t, 10*time.Second)
	for range 5 {
		if _, err := c.Lookup(ctx, addr, 1, "abc", false, 0); err != nil {
			t.Fatal(err)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("%d dials for 5 calls over TLS, want 1", n)
	}
}

// trackingListener hands every accepted connection to add.
type trackingListener struct {
	net.Listener
	add func(net.Conn)
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.add(c)
	}
	return c, err
}
