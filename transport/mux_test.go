package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

func mustMux(tb testing.TB) *Mux {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	m, err := New(Config{Listener: ln, HeaderTimeout: 500 * time.Millisecond})
	if err != nil {
		tb.Fatal(err)
	}
	go m.Serve(context.Background())
	tb.Cleanup(func() { m.Close() })
	return m
}

func TestRoutesByKindAndGroup(t *testing.T) {
	m := mustMux(t)
	layers := map[key]*Layer{}
	for _, k := range []key{{KindRaft, 0}, {KindRaft, 1}, {KindRaft, 300}, {KindRPC, 0}} {
		l, err := m.Layer(k.kind, k.group)
		if err != nil {
			t.Fatal(err)
		}
		layers[k] = l
	}
	if _, err := m.Layer(KindRaft, 1); !errors.Is(err, ErrRegistered) {
		t.Fatalf("double registration: %v", err)
	}
	for k, l := range layers {
		c, err := Dial(context.Background(), m.Addr(), k.kind, k.group, time.Second, nil)
		if err != nil {
			t.Fatal(err)
		}
		msg := []byte{byte(k.kind), byte(k.group)}
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		got, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 2)
		if _, err := io.ReadFull(got, buf); err != nil {
			t.Fatal(err)
		}
		if buf[0] != msg[0] || buf[1] != msg[1] {
			t.Fatalf("layer %v got bytes %v meant for another", k, buf)
		}
		c.Close()
		got.Close()
	}
	if l := layers[key{KindRaft, 0}]; l.Addr().String() != m.Addr() {
		t.Fatalf("layer addr %s, mux addr %s", l.Addr(), m.Addr())
	}
}

func expectClosedByPeer(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("connection still open")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("mux did not close the connection")
	}
}

func TestRejectsBadHeaderAndUnknownGroup(t *testing.T) {
	m := mustMux(t)
	if _, err := m.Layer(KindRaft, 1); err != nil {
		t.Fatal(err)
	}
	c, err := Dial(context.Background(), m.Addr(), KindRaft, 2, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	expectClosedByPeer(t, c)

	raw, err := net.Dial("tcp", m.Addr())
	if err != nil {
		t.Fatal(err)
	}
	raw.Write([]byte("GET / HTTP/1.1\r\n"))
	expectClosedByPeer(t, raw)

	// A client that sends nothing is cut off after HeaderTimeout.
	silent, err := net.Dial("tcp", m.Addr())
	if err != nil {
		t.Fatal(err)
	}
	expectClosedByPeer(t, silent)
}

func TestCloseUnblocksAccept(t *testing.T) {
	m := mustMux(t)
	l, _ := m.Layer(KindRPC, 0)
	errc := make(chan error, 1)
	go func() {
		_, err := l.Accept()
		errc <- err
	}()
	m.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("Accept err = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Accept still blocked after Close")
	}
	if _, err := m.Layer(KindRPC, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Layer after Close: %v", err)
	}
}

func TestCloseDoesNotWaitForSilentPeers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{Listener: ln, HeaderTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	go m.Serve(context.Background())
	silent, err := net.Dial("tcp", m.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	// Wait until the mux has accepted it.
	deadline := time.Now().Add(5 * time.Second)
	for {
		m.mu.Lock()
		n := len(m.pending)
		m.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("connection never accepted")
		}
		time.Sleep(time.Millisecond)
	}
	done := make(chan struct{})
	go func() { m.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited for a peer that never sent its header")
	}
}

// TestSourceIPGroupsIPv6By64: the pending-connection cap counts an IPv6
// peer by its /64 (issue 26: per exact address it was moot), an IPv4 one
// (mapped or not) by its address.
func TestSourceIPGroupsIPv6By64(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"192.0.2.7:7000":              "192.0.2.7",
		"[::ffff:192.0.2.7]:7000":     "192.0.2.7",
		"[2001:db8:1:2:3:4:5:6]:7000": "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:9":    "2001:db8:1:2::/64",
		"[fe80::1%eth0]:7000":         "fe80::/64",
	} {
		a, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := sourceIP(a); got != want {
			t.Errorf("sourceIP(%s) = %q, want %q", addr, got, want)
		}
	}
	if got := sourceIP(&net.UnixAddr{Name: "@x", Net: "unix"}); got != "@x" {
		t.Errorf("a unix address: %q", got)
	}
}

// TestKnownSourcesAreBounded: the sources remembered as members are at
// most maxKnown, the oldest forgotten first: strangers that complete no
// handshake are never remembered, and members beyond the bound cost no
// more memory.
func TestKnownSourcesAreBounded(t *testing.T) {
	t.Parallel()
	m := &Mux{known: map[string]uint64{}}
	for i := range maxKnown + 50 {
		m.rememberLocked(fmt.Sprintf("10.0.%d.%d", i/250, i%250))
	}
	if len(m.known) != maxKnown {
		t.Fatalf("%d remembered, bound %d", len(m.known), maxKnown)
	}
	if _, ok := m.known["10.0.0.0"]; ok {
		t.Fatal("the oldest source is still remembered")
	}
	last := maxKnown + 49
	if _, ok := m.known[fmt.Sprintf("10.0.%d.%d", last/250, last%250)]; !ok {
		t.Fatal("the newest source was forgotten")
	}
}
