package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/linkraft/linkraft/internal/testkit"
)

// TestHTTPConnectionLimit: with -max-conns 8, eight idle connections take
// every slot; a ninth connection's request waits (the process does not
// accept it, so it holds no descriptor for it) and is answered as soon as
// one of the eight closes.
func TestHTTPConnectionLimit(t *testing.T) {
	t.Parallel()
	addrs := newAddrs(t)
	startProc(t, t.TempDir(), addrs, "-max-conns", "8")
	http.DefaultClient.CloseIdleConnections() // startProc's readiness polls
	// Eight keep-alive connections, each shown accepted by an answer, then
	// left open and idle.
	var idle []net.Conn
	for range 8 {
		c, r := dialHealthz(t, addrs.http)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("connection %d within the limit: %v", len(idle)+1, err)
		}
		resp.Body.Close()
		idle = append(idle, c)
	}
	// The ninth: its request is not read while the eight are open.
	c, r := dialHealthz(t, addrs.http)
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := r.ReadByte(); err == nil {
		t.Fatal("a ninth connection was served past -max-conns 8")
	}
	idle[0].Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("the waiting connection was not served after a slot freed: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %d", resp.StatusCode)
	}
}

// dialHealthz opens a connection to addr and sends GET /healthz on it; the
// connection is closed at the end of the test.
func dialHealthz(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	return c, bufio.NewReader(c)
}

// TestJoinOnlyNodeWaitsAndSaysWhy: a node started with -join and no
// -bootstrap-expect that reaches no one does not form a cluster of its
// own and does not give up: /healthz answers, /readyz answers 503 saying
// what it waits for, and the failed join is logged at ERROR.
func TestJoinOnlyNodeWaitsAndSaysWhy(t *testing.T) {
	t.Parallel()
	addrs := newAddrs(t)
	nobody := freeAddr(t)
	p := launchProc(t, t.TempDir(), addrs, "-join", nobody, "-cluster-key-file", testKeyFile(t))
	base := "http://" + addrs.http
	var detail string
	testkit.Eventually(t, 30*time.Second, func() error {
		status, m, _, err := call("GET", base+"/readyz", "")
		if err == nil && status == http.StatusServiceUnavailable {
			detail, _ = m["detail"].(string)
			if strings.Contains(detail, "no -join address answered") {
				return nil
			}
		}
		return fmt.Errorf("/readyz does not say why: %d %q %v", status, detail, err)
	})
	if !strings.Contains(detail, "never forms one") {
		t.Fatalf("/readyz detail %q does not say the node only joins", detail)
	}
	if status, _, _, err := call("GET", base+"/healthz", ""); err != nil || status != http.StatusOK {
		t.Fatalf("/healthz while starting: %d %v", status, err)
	}
	// The admin listener says so too (linknode status does not hang).
	if status, m, _, err := call("GET", p.admin+"/admin/v1/cluster", ""); err != nil || status != http.StatusServiceUnavailable ||
		!strings.Contains(fmt.Sprint(m["detail"]), "never forms one") {
		t.Fatalf("admin listener while starting: %d %v %v", status, m, err)
	}
	testkit.WaitFor(t, 30*time.Second, "an ERROR line about the failed join", func() bool {
		return strings.Contains(p.logs(), `level=ERROR msg="cannot join`)
	})
	select {
	case <-p.exited:
		t.Fatalf("the join-only node gave up: %v", p.waitErr)
	default:
	}
}
