package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/linkraft/linkraft/internal/testkit"
)

// TestIdleConnectionFloods: idle connections cannot take a node from
// the others. With -max-conns 64 (8 a client): a client from one address
// that opens 40 connections and sends nothing holds 8, its others answered
// 429 at once; a flood of idle connections from eight addresses fills the
// listener until it is under pressure, when the idle ones are closed
// early. Throughout, a client from another address gets its redirects,
// /healthz and a create, and the admin listener answers. Before the guard,
// eight idle connections from one address held every slot of
// -max-conns 8, and a 65th local connection stalled the admin listener.
func TestIdleConnectionFloods(t *testing.T) {
	t.Parallel()
	addrs := newAddrs(t)
	p := startProc(t, t.TempDir(), addrs, "-max-conns", "64", "-max-conns-per-client", "8")
	http.DefaultClient.CloseIdleConnections() // startProc's readiness polls
	st, body, _, err := call("POST", p.base+"/api/v1/links", `{"url":"https://flooded.example/"}`)
	if err != nil || st != 201 {
		t.Fatalf("create: %d %v %v", st, body, err)
	}
	code := body["code"].(string)
	other := newClientFrom(t, "127.0.0.2")
	check := func(when string) {
		t.Helper()
		for range 20 {
			resp, err := other.Get(p.base + "/" + code)
			if err != nil {
				t.Fatalf("%s: redirect: %v", when, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusFound && resp.StatusCode != http.StatusMovedPermanently {
				t.Fatalf("%s: redirect answered %d", when, resp.StatusCode)
			}
		}
		req, _ := http.NewRequest("POST", p.base+"/api/v1/links", strings.NewReader(`{"url":"https://during.example/"}`))
		req.Header.Set("Authorization", "Bearer "+testAdminKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := other.Do(req)
		if err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("%s: create: %v %v", when, resp, err)
		}
		resp.Body.Close()
		resp, err = newClientFrom(t, "127.0.0.3").Get("http://" + addrs.admin + "/healthz")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: admin /healthz: %v %v", when, resp, err)
		}
		resp.Body.Close()
	}
	check("before")

	// One address, 40 keep-alive connections left idle after a request:
	// 8 held, 32 refused with 429.
	refused := 0
	for range 40 {
		c := testkit.DialFrom(t, "127.0.0.5", addrs.http)
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Content-Type") == "application/problem+json":
			refused++
		case resp.StatusCode != http.StatusOK:
			t.Fatalf("connection from the flooding address: %d", resp.StatusCode)
		}
	}
	if refused != 32 {
		t.Fatalf("%d of 40 connections from one address refused, want 32 (8 a client)", refused)
	}
	check("with one address holding its cap")

	// Eight more addresses, 8 idle connections each: the listener passes
	// three quarters of its slots and closes idle connections early.
	for i := range 8 {
		for range 8 {
			testkit.DialFrom(t, fmt.Sprintf("127.0.0.%d", 10+i), addrs.http)
		}
	}
	// While every slot is taken new connections are refused (503); once
	// the flood's connections have been idle a second they are closed.
	testkit.WaitFor(t, 20*time.Second, "idle connections closed under pressure", func() bool {
		resp, err := other.Get(p.base + "/" + code)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusFound && metric(t, addrs.admin, `linkraft_http_conns_idle_closed_total{listener="http"}`) != ""
	})
	check("after an idle flood from eight addresses")
	// The admin listener: 80 idle local connections do not stall it.
	for range 80 {
		testkit.DialFrom(t, "127.0.0.4", addrs.admin)
	}
	testkit.WaitFor(t, 20*time.Second, "the admin listener to answer past 80 idle connections", func() bool {
		resp, err := newClientFrom(t, "127.0.0.3").Get("http://" + addrs.admin + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if !strings.Contains(p.logs(), "connections refused") {
		t.Fatal("refusals not logged")
	}
}

// newClientFrom is an HTTP client whose connections come from the
// loopback address from and that does not follow redirects.
func newClientFrom(t *testing.T, from string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	tr := &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 2}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// metric returns the line of the admin listener's /metrics that starts
// with name (labels included), or "".
func metric(t *testing.T, admin, name string) string {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), name+" ") && !strings.HasSuffix(sc.Text(), " 0") {
			return sc.Text()
		}
	}
	return ""
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
