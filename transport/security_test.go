package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/linkraft/linkraft/internal/clusterkey"
	"github.com/linkraft/linkraft/internal/peertls"
)

func tlsMux(tb testing.TB, id *peertls.Identity, cfg Config) *Mux {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	cfg.Listener = ln
	if id != nil {
		cfg.ServerTLS, cfg.ClientTLS = id.ServerConfig(), id.ClientConfig()
	}
	if cfg.HeaderTimeout == 0 {
		cfg.HeaderTimeout = time.Second
	}
	m, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	go m.Serve(context.Background())
	tb.Cleanup(func() { m.Close() })
	return m
}

func newIdentity(t *testing.T, k *clusterkey.Key, node string) *peertls.Identity {
	t.Helper()
	id, err := peertls.New(peertls.Config{NodeID: node, ClusterKey: k})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// acceptWithin returns the next connection of l, or nil after d.
func acceptWithin(l *Layer, d time.Duration) net.Conn {
	got := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			c = nil
		}
		got <- c
	}()
	select {
	case c := <-got:
		return c
	case <-time.After(d):
		return nil
	}
}

func TestTLSMuxRoutesMembersAndNamesThem(t *testing.T) {
	k, _ := clusterkey.Generate()
	m := tlsMux(t, newIdentity(t, &k, "n1"), Config{})
	peer := tlsMux(t, newIdentity(t, &k, "n2"), Config{})
	l, err := m.Layer(KindRaft, 3)
	if err != nil {
		t.Fatal(err)
	}
	c, err := peer.Dial(context.Background(), m.Addr(), KindRaft, 3, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	got := acceptWithin(l, 5*time.Second)
	if got == nil {
		t.Fatal("member connection never routed")
	}
	defer got.Close()
	buf := make([]byte, 2)
	if _, err := io.ReadFull(got, buf); err != nil || string(buf) != "hi" {
		t.Fatalf("read %q, %v", buf, err)
	}
	if id, ok := peertls.PeerNodeID(PeerConn(got)); !ok || id != "n2" {
		t.Fatalf("peer named %q (%v), want n2", id, ok)
	}
}

// The attacks on the peer port: a plain TCP client speaking the header, a
// TLS client without a certificate, and a node of another cluster key. None
// reaches a layer.
func TestTLSMuxRefusesStrangers(t *testing.T) {
	k, _ := clusterkey.Generate()
	other, _ := clusterkey.Generate()
	m := tlsMux(t, newIdentity(t, &k, "n1"), Config{})
	l, err := m.Layer(KindRPC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Plain TCP with a valid header and an RPC frame.
	if raw, err := Dial(ctx, m.Addr(), KindRPC, 0, time.Second, nil); err == nil {
		_, _ = raw.Write([]byte{0, 0, 0, 2, '{', '}'})
		defer raw.Close()
	}
	// TLS without a client certificate.
	if c, err := Dial(ctx, m.Addr(), KindRPC, 0, time.Second, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}); err == nil {
		defer c.Close()
	}
	// Another cluster's member.
	stranger := newIdentity(t, &other, "n1")
	if _, err := Dial(ctx, m.Addr(), KindRPC, 0, time.Second, stranger.ClientConfig()); err == nil {
		t.Fatal("a node of another cluster key completed a handshake")
	}
	if c := acceptWithin(l, 1500*time.Millisecond); c != nil {
		t.Fatalf("a stranger's connection from %v was routed", c.RemoteAddr())
	}
}

// One source holding many silent connections (the fd flood) is cut off at
// the per-source limit, and a member from elsewhere still gets through.
func TestPendingConnectionsAreLimitedPerSource(t *testing.T) {
	m := tlsMux(t, nil, Config{MaxPendingPerSource: 4, HeaderTimeout: time.Minute})
	l, err := m.Layer(KindRaft, 1)
	if err != nil {
		t.Fatal(err)
	}
	var silent []net.Conn
	for range 10 {
		c, err := net.Dial("tcp", m.Addr())
		if err != nil {
			t.Fatal(err)
		}
		silent = append(silent, c)
		defer c.Close()
	}
	// Six of the ten are closed by the mux: their read ends with EOF, the
	// others' at the deadline. Refused is counted before the close, so
	// poll it first.
	deadline := time.Now().Add(5 * time.Second)
	for m.Refused() < 6 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	closed := 0
	for _, c := range silent {
		_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err != nil && !errors.Is(err, syscall.ETIMEDOUT) && !isTimeout(err) {
			closed++
		}
	}
	if closed != 6 || m.Refused() != 6 {
		t.Fatalf("%d connections closed, %d refused; want 6 over the limit of 4", closed, m.Refused())
	}
	// Another source (127.0.0.2) is not held back by the first.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	raw, err := d.Dial("tcp", m.Addr())
	if err != nil {
		t.Fatalf("dial from 127.0.0.2: %v", err)
	}
	defer raw.Close()
	if _, err := raw.Write(Header(KindRaft, 1)); err != nil {
		t.Fatal(err)
	}
	if c := acceptWithin(l, 5*time.Second); c == nil {
		t.Fatal("a connection from another source was not routed")
	} else {
		c.Close()
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// failingListener fails its first accepts the way an exhausted process
// does (EMFILE), then serves.
type failingListener struct {
	net.Listener
	failures atomic.Int32
}

func (f *failingListener) Accept() (net.Conn, error) {
	if f.failures.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
	}
	return f.Listener.Accept()
}

func TestAcceptLoopSurvivesFileDescriptorExhaustion(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fl := &failingListener{Listener: ln}
	fl.failures.Store(5)
	m, err := New(Config{Listener: fl})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- m.Serve(context.Background()) }()
	defer m.Close()
	l, _ := m.Layer(KindRPC, 0)
	c, err := Dial(context.Background(), m.Addr(), KindRPC, 0, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := acceptWithin(l, 5*time.Second); got == nil {
		select {
		case err := <-served:
			t.Fatalf("accept loop stopped on EMFILE: %v", err)
		default:
			t.Fatal("connection not routed after EMFILE")
		}
	} else {
		got.Close()
	}
	if fl.failures.Load() >= 0 {
		t.Fatal("the listener's failures were never hit")
	}
}

// TestMembersGetInPastTheStrangers: with every pending slot held by
// silent strangers, a new stranger is refused, but a source that has
// completed a handshake here before (a member) gets in at once.
func TestMembersGetInPastTheStrangers(t *testing.T) {
	m := tlsMux(t, nil, Config{MaxPending: 8, MaxPendingPerSource: 4, HeaderTimeout: time.Minute})
	l, err := m.Layer(KindRaft, 1)
	if err != nil {
		t.Fatal(err)
	}
	dialFrom := func(src string, header bool) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		c, err := d.Dial("tcp", m.Addr())
		if err != nil {
			t.Fatalf("dial from %s: %v", src, err)
		}
		t.Cleanup(func() { c.Close() })
		if header {
			if _, err := c.Write(Header(KindRaft, 1)); err != nil {
				t.Fatal(err)
			}
		}
		return c
	}
	dialFrom("127.0.0.3", true)
	if c := acceptWithin(l, 5*time.Second); c == nil {
		t.Fatal("the member's first connection was not routed")
	} else {
		c.Close()
	}
	for _, src := range []string{"127.0.0.4", "127.0.0.5"} {
		for range 4 {
			dialFrom(src, false)
		}
	}
	dialFrom("127.0.0.6", true)
	deadline := time.Now().Add(5 * time.Second)
	for m.Refused() < 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if m.Refused() != 1 {
		t.Fatalf("%d refused; want the stranger past the eight pending", m.Refused())
	}
	dialFrom("127.0.0.3", true)
	if c := acceptWithin(l, 5*time.Second); c == nil {
		t.Fatal("a known member was not let in past the strangers")
	} else {
		c.Close()
	}
	if m.Refused() != 1 {
		t.Fatalf("%d refused after the member's connection", m.Refused())
	}
}
