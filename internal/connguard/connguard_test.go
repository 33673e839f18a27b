package connguard_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linkraft/linkraft/internal/connguard"
	"github.com/linkraft/linkraft/internal/testkit"
)

// serve serves ok on a guarded loopback listener whose connections tell
// the guard when they are idle, as linknode's servers do.
func serve(t *testing.T, cfg connguard.Config) *connguard.Listener {
	return serveWith(t, cfg, nil)
}

// serveWith is serve whose /slow waits for release to close.
func serveWith(t *testing.T, cfg connguard.Config, release chan struct{}) *connguard.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Refuse = func(c net.Conn, r connguard.Reason) {
		status := map[connguard.Reason]int{connguard.PerClient: 429, connguard.Full: 503}[r]
		fmt.Fprintf(c, "HTTP/1.1 %d x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", status)
	}
	g := connguard.New(ln, cfg)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/slow" {
				<-release
			}
			_, _ = io.WriteString(w, "ok "+r.URL.Path)
		}),
		ConnState: func(c net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew, http.StateIdle:
				connguard.SetIdle(c, true)
			case http.StateActive:
				connguard.SetIdle(c, false)
			}
		}}
	go func() { _ = srv.Serve(g) }()
	t.Cleanup(func() { _ = srv.Close() })
	return g
}

// dial opens a connection to g from the loopback address from.
func dial(t *testing.T, g *connguard.Listener, from string) net.Conn {
	t.Helper()
	return testkit.DialFrom(t, from, g.Addr().String())
}

// get sends GET path on c and returns the status.
func get(t *testing.T, c net.Conn, path string) int {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path); err != nil {
		return -1
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return -1
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// waitOpen waits until the guard counts n open connections.
func waitOpen(t *testing.T, g *connguard.Listener, n int) {
	t.Helper()
	testkit.WaitFor(t, 10*time.Second, fmt.Sprintf("%d open", n), func() bool { return g.Stats().Open == n })
}

// TestPerClientCap: one client past its cap is answered 429 and closed;
// another client is served; an IPv4 address is one client; an exempt one
// (a trusted proxy) has no cap.
func TestPerClientCap(t *testing.T) {
	t.Parallel()
	proxy := netip.MustParseAddr("127.0.0.9")
	g := serve(t, connguard.Config{Max: 100, PerClient: 4, PressureIdle: time.Hour, Exempt: func(a netip.Addr) bool { return a == proxy }})
	for i := range 6 {
		if st := get(t, dial(t, g, "127.0.0.9"), "/x"); st != 200 {
			t.Fatalf("connection %d of an exempt client: %d", i+1, st)
		}
	}
	for range 4 {
		dial(t, g, "127.0.0.1")
	}
	waitOpen(t, g, 10)
	if st := get(t, dial(t, g, "127.0.0.1"), "/x"); st != 429 {
		t.Fatalf("the fifth connection of one client: %d, want 429", st)
	}
	if st := get(t, dial(t, g, "127.0.0.2"), "/x"); st != 200 {
		t.Fatalf("another client: %d", st)
	}
	if s := g.Stats(); s.Refused[connguard.PerClient] != 1 || s.Refused[connguard.Full] != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// TestReserveIsForHealthChecks: with every slot but the reserve taken, a
// new connection is served only if its first request is a health check;
// with every slot taken, none is.
func TestReserveIsForHealthChecks(t *testing.T) {
	t.Parallel()
	g := serve(t, connguard.Config{Max: 10, Reserve: 2, PerClient: 100, PressureIdle: time.Hour})
	for range 8 {
		dial(t, g, "127.0.0.1")
	}
	waitOpen(t, g, 8)
	if st := get(t, dial(t, g, "127.0.0.3"), "/abc"); st != 503 {
		t.Fatalf("a redirect in a reserved slot: %d, want 503", st)
	}
	health := dial(t, g, "127.0.0.3")
	if st := get(t, health, "/healthz"); st != 200 {
		t.Fatalf("/healthz in a reserved slot: %d", st)
	}
	if st := get(t, dial(t, g, "127.0.0.3"), "/readyz?verbose=1"); st != 200 {
		t.Fatalf("/readyz in a reserved slot: %d", st)
	}
	waitOpen(t, g, 10)
	if st := get(t, dial(t, g, "127.0.0.3"), "/healthz"); st != 503 {
		t.Fatalf("/healthz with every slot taken: %d, want 503", st)
	}
	if s := g.Stats(); s.Refused[connguard.Full] != 2 {
		t.Fatalf("stats %+v", s)
	}
}

// TestPressureClosesIdleConnections: at three quarters of the cap, a new
// connection has the guard close those idle longer than PressureIdle
// (keep-alive ones between requests, ones that never sent a byte, ones
// dribbling a request head); one whose request is being served is left
// alone.
func TestPressureClosesIdleConnections(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	g := serveWith(t, connguard.Config{Max: 8, PerClient: 100, PressureIdle: 50 * time.Millisecond}, release)
	kept := dial(t, g, "127.0.0.1")
	if st := get(t, kept, "/first"); st != 200 {
		t.Fatal(st)
	}
	busy := dial(t, g, "127.0.0.1")
	if _, err := io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(dial(t, g, "127.0.0.1"), "GET /dribble HTTP/1.1\r\n"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		dial(t, g, "127.0.0.1")
	}
	waitOpen(t, g, 6)
	testkit.WaitFor(t, 10*time.Second, "idle connections closed under pressure", func() bool {
		get(t, dial(t, g, "127.0.0.4"), "/new") // each new connection may sweep
		return g.Stats().IdleClosed >= 5
	})
	_ = kept.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := kept.Read(make([]byte, 1)); err == nil {
		t.Fatalf("an idle keep-alive connection under pressure is still open (read %d)", n)
	}
	close(release)
	resp, err := http.ReadResponse(bufio.NewReader(busy), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the busy connection: %v, %v", resp, err)
	}
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), "/slow") {
		t.Fatalf("busy answer %q", b)
	}
}

// TestRefusalsAnsweredAreBounded: at most 64 refused connections are being
// answered at once (each waits up to half a second for its request head);
// past that a refused connection is closed at once, so a flood of them
// holds no more descriptors or goroutines than that.
func TestRefusalsAnsweredAreBounded(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var answering atomic.Int64
	g := connguard.New(ln, connguard.Config{Max: 100, PerClient: 1, PressureIdle: time.Hour, Refuse: func(c net.Conn, _ connguard.Reason) {
		answering.Add(1)
		<-release
	}})
	defer g.Close()
	defer close(release)
	go func() {
		for {
			if _, err := g.Accept(); err != nil {
				return
			}
		}
	}()
	dial(t, g, "127.0.0.1") // the client's one connection
	var refused []net.Conn
	for range 100 {
		refused = append(refused, dial(t, g, "127.0.0.1"))
	}
	testkit.WaitFor(t, 10*time.Second, "64 refusals being answered", func() bool { return answering.Load() == 64 })
	closed := 0
	for _, c := range refused {
		_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); errors.Is(err, io.EOF) {
			closed++
		}
	}
	if closed != 36 || answering.Load() != 64 || g.Stats().Refused[connguard.PerClient] != 100 {
		t.Fatalf("%d closed unanswered, %d being answered, stats %+v; want 36 and 64 of 100", closed, answering.Load(), g.Stats())
	}
}
