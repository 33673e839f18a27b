package httpapi_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/linkraft/linkraft/httpapi"
	"github.com/linkraft/linkraft/httpapi/fastpath"
	"github.com/linkraft/linkraft/link"
)

// exchange writes raw to addr on a new connection and reads the responses
// to the given methods, in order (fewer if the server closes first).
func exchange(tb testing.TB, addr, raw string, methods ...string) []string {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		tb.Fatal(err)
	}
	br := bufio.NewReader(c)
	var out []string
	for _, m := range methods {
		resp, err := http.ReadResponse(br, &http.Request{Method: m})
		if err != nil {
			out = append(out, "read error: "+err.Error())
			break
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Header.Del("Date")
		var hs []string
		for k, v := range resp.Header {
			hs = append(hs, k+": "+strings.Join(v, ","))
		}
		slices.Sort(hs)
		out = append(out, fmt.Sprintf("%s %d\n%s\n\n%s", resp.Proto, resp.StatusCode, strings.Join(hs, "\n"), body))
	}
	return out
}

// Every answer through the fast path is byte for byte (Date aside) what
// net/http alone gives, for requests it serves and for the ones it hands
// over: malformed heads, bodies, other methods and paths, gone links,
// pipelined sequences that switch from one to the other.
func TestFastPathAnswersAsNetHTTPDoes(t *testing.T) {
	t.Parallel()
	tn := startNode(t, link.URLPolicy{})
	fastAddr, fl := strings.TrimPrefix(tn.srv.URL, "http://"), tn.fast
	plain := httptest.NewServer(tn.srv.Config.Handler) // net/http alone
	defer plain.Close()
	plainAddr := strings.TrimPrefix(plain.URL, "http://")

	code := func(body string) string { return tn.create(t, body)["code"].(string) }
	c302 := code(`{"url":"https://example.com/a?b=c"}`)
	c301 := code(`{"url":"https://example.com/301","redirect":301}`)
	c307 := code(`{"url":"https://example.com/307","redirect":307}`)
	c308 := code(`{"url":"https://example.com/308","redirect":308}`)
	limited := code(`{"url":"https://example.com/limited","max_visits":100}`)
	locked := code(`{"url":"https://example.com/locked","password":"pw-pw-pw-pw"}`)
	ruled := code(`{"url":"https://example.com/ruled","redirect":301,"rules":[{"device":"ios","url":"https://example.com/ios"},{"language":"fr","url":"https://example.com/fr?x=1"}]}`)
	disabled := code(`{"url":"https://example.com/disabled"}`)
	if r := tn.do(t, "PATCH", "/api/v1/links/"+disabled, "application/json", []byte(`{"disabled":true}`)); r.status != 200 {
		t.Fatalf("disable: %d", r.status)
	}
	deleted := code(`{"url":"https://example.com/deleted"}`)
	if r := tn.do(t, "DELETE", "/api/v1/links/"+deleted, "", nil); r.status != 204 {
		t.Fatalf("delete: %d", r.status)
	}
	get := func(target string, headers ...string) string {
		return "GET " + target + " HTTP/1.1\r\nHost: sho.rt\r\n" + strings.Join(headers, "") + "\r\n"
	}
	longUA := "User-Agent: " + strings.Repeat("x", 5000) + "\r\n"

	cases := []struct {
		name    string
		raw     string
		methods []string
		fast    bool // answered by the fast path (at least the first response)
	}{
		{"302", get("/" + c302), []string{"GET"}, true},
		{"301", get("/" + c301), []string{"GET"}, true},
		{"307", get("/" + c307), []string{"GET"}, true},
		{"308", get("/" + c308), []string{"GET"}, true},
		{"HEAD", "HEAD /" + c302 + " HTTP/1.1\r\nHost: sho.rt\r\n\r\n", []string{"HEAD"}, true},
		{"query", get("/" + c302 + "?utm=1&x=%20"), []string{"GET"}, true},
		{"browser headers", get("/"+c302, "User-Agent: Mozilla/5.0 (X11)\r\n", "Referer: https://news.example/\r\n", "DNT: 1\r\n", "accept: text/html\r\n"), []string{"GET"}, true},
		{"connection close", get("/"+c302, "Connection: close\r\n"), []string{"GET"}, true},
		{"HTTP/1.0", "GET /" + c302 + " HTTP/1.0\r\n\r\n", []string{"GET"}, true},
		{"HTTP/1.0 keep-alive", "GET /" + c302 + " HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", []string{"GET"}, true},
		{"pipelined", get("/"+c302) + get("/"+c301) + "HEAD /" + c308 + " HTTP/1.1\r\nHost: sho.rt\r\n\r\n", []string{"GET", "GET", "HEAD"}, true},
		{"pipelined into net/http", get("/"+c302) + "POST /" + c302 + " HTTP/1.1\r\nHost: sho.rt\r\nContent-Length: 2\r\n\r\n{}" + get("/"+c301), []string{"GET", "POST", "GET"}, true},

		{"unknown code", get("/nosuchcode"), []string{"GET"}, false},
		{"unknown code, browser", get("/nosuchcode", "Accept: text/html\r\n"), []string{"GET"}, false},
		{"disabled", get("/" + disabled), []string{"GET"}, false},
		{"deleted", get("/" + deleted), []string{"GET"}, false},
		{"limited link", "HEAD /" + limited + " HTTP/1.1\r\nHost: sho.rt\r\n\r\n", []string{"HEAD"}, false},
		{"password link", get("/" + locked), []string{"GET"}, false},
		{"rules, no match", get("/" + ruled), []string{"GET"}, true},
		{"rules, device", get("/"+ruled, "User-Agent: "+uaIPhone+"\r\n"), []string{"GET"}, true},
		{"rules, two User-Agents", get("/"+ruled, "User-Agent: "+uaIPhone+"\r\n", "User-Agent: "+uaDesktop+"\r\n"), []string{"GET"}, true},
		{"rules, language and query", get("/"+ruled+"?utm=1", "Accept-Language: fr-FR, en;q=0.5\r\n", "accept-language: de\r\n"), []string{"GET"}, true},
		{"invalid code", get("/not.a.code"), []string{"GET"}, false},
		{"escaped path", get("/" + c302[:1] + "%" + fmt.Sprintf("%02X", c302[1]) + c302[2:]), []string{"GET"}, false},
		{"two segments", get("/" + c302 + "/x"), []string{"GET"}, false},
		{"healthz", get("/healthz"), []string{"GET"}, false},
		{"API", get("/api/v1/links/" + c302), []string{"GET"}, false},
		{"POST on a code", "POST /" + c302 + " HTTP/1.1\r\nHost: sho.rt\r\nContent-Length: 0\r\n\r\n", []string{"POST"}, false},
		{"lowercase method", "get /" + c302 + " HTTP/1.1\r\nHost: sho.rt\r\n\r\n", []string{"GET"}, false},
		{"GET with a body", get("/"+c302, "Content-Length: 5\r\n") + "hello" + get("/"+c301), []string{"GET", "GET"}, false},
		{"chunked GET", get("/"+c302, "Transfer-Encoding: chunked\r\n") + "0\r\n\r\n", []string{"GET"}, false},
		{"expect", get("/"+c302, "Expect: 100-continue\r\n"), []string{"GET"}, false},
		{"upgrade", get("/"+c302, "Connection: Upgrade\r\n", "Upgrade: websocket\r\n"), []string{"GET"}, false},
		{"missing host", "GET /" + c302 + " HTTP/1.1\r\n\r\n", []string{"GET"}, false},
		{"two hosts", get("/"+c302, "Host: other\r\n"), []string{"GET"}, false},
		{"IPv6 host with port", "GET /" + c302 + " HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n", []string{"GET"}, true},
		{"host with a space", "GET /" + c302 + " HTTP/1.1\r\nHost: a b\r\n\r\n", []string{"GET"}, false},
		{"header without colon", get("/"+c302, "Broken header\r\n"), []string{"GET"}, false},
		{"space before colon", get("/"+c302, "User-Agent : x\r\n"), []string{"GET"}, false},
		{"folded header", get("/"+c302, "User-Agent: a\r\n", " b\r\n"), []string{"GET"}, false},
		{"control byte in a value", get("/"+c302, "User-Agent: a\x01b\r\n"), []string{"GET"}, false},
		{"bare LF", "GET /" + c302 + " HTTP/1.1\nHost: sho.rt\n\n", []string{"GET"}, false},
		{"HTTP/2.0 line", "GET /" + c302 + " HTTP/2.0\r\nHost: sho.rt\r\n\r\n", []string{"GET"}, false},
		{"HTTP/1.2", "GET /" + c302 + " HTTP/1.2\r\nHost: sho.rt\r\n\r\n", []string{"GET"}, false},
		{"double space", "GET  /" + c302 + " HTTP/1.1\r\nHost: sho.rt\r\n\r\n", []string{"GET"}, false},
		{"absolute form", "GET http://sho.rt/" + c302 + " HTTP/1.1\r\nHost: sho.rt\r\n\r\n", []string{"GET"}, false},
		{"head over the buffer", get("/"+c302, longUA), []string{"GET"}, false},
	}
	for _, c := range cases {
		served0, _ := fl.Stats()
		want := exchange(t, plainAddr, c.raw, c.methods...)
		got := exchange(t, fastAddr, c.raw, c.methods...)
		served1, _ := fl.Stats()
		if !slices.Equal(got, want) {
			t.Errorf("%s:\nfast path:\n%s\nnet/http:\n%s", c.name, strings.Join(got, "\n---\n"), strings.Join(want, "\n---\n"))
		}
		if took := served1 > served0; took != c.fast {
			t.Errorf("%s: answered by the fast path %v, want %v", c.name, took, c.fast)
		}
	}
}

// A connection the fast path holds between requests is closed by
// Shutdown; one mid-way through net/http is net/http's to close.
func TestFastListenerShutdownClosesIdleConnections(t *testing.T) {
	t.Parallel()
	tn := startNode(t, link.URLPolicy{})
	c302 := tn.create(t, `{"url":"https://example.com/a"}`)["code"].(string)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fl := tn.srv.Config.Handler.(*httpapi.Server).FastListener(ln, fastpath.Options{})
	hs := &http.Server{Handler: tn.srv.Config.Handler}
	go func() { _ = hs.Serve(fl) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	if _, err := io.WriteString(c, "GET /"+c302+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
	if err != nil || resp.StatusCode != 302 {
		t.Fatalf("redirect: %v %v", resp, err)
	}
	resp.Body.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(ctx)
	if err := fl.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := br.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("idle connection after Shutdown: read %d, %v; want EOF", n, err)
	}
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Fatal("still accepting after Shutdown")
	}
}

// A connection that sends no request is closed after ReadHeaderTimeout,
// not held for IdleTimeout.
func TestFastListenerDropsSilentConnections(t *testing.T) {
	t.Parallel()
	tn := startNode(t, link.URLPolicy{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fl := tn.srv.Config.Handler.(*httpapi.Server).FastListener(ln, fastpath.Options{ReadHeaderTimeout: 200 * time.Millisecond, IdleTimeout: time.Hour})
	defer fl.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("silent connection: read %d, %v; want EOF once the header timeout passes", n, err)
	}
}
