package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linkraft/linkraft/httpapi/fastpath"
	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/link"
)

// stubLinks holds a few links in memory: the redirect path's view of the
// links role, for tests of the HTTP layer alone. The methods it leaves out
// panic (the embedded nil Links); the handler turns a panic into a 500,
// which a differential test would see as a difference.
type stubLinks struct {
	Links
	links map[string]*link.Link
}

func (s *stubLinks) ResolveLocal(code string) (*link.Link, bool) {
	l, ok := s.links[code]
	return l, ok
}

func (s *stubLinks) Resolve(_ context.Context, code string) (*link.Link, error) {
	if l, ok := s.links[code]; ok {
		return l, nil
	}
	return nil, link.ErrNotFound
}

// stubKeys knows no key and blocks nothing.
type stubKeys struct{ Keys }

func (stubKeys) Authenticate(string) (apikey.Key, error) {
	return apikey.Key{}, apikey.ErrUnauthorized
}
func (stubKeys) Blocked(string) bool    { return false }
func (stubKeys) BlockedURL(string) bool { return false }

// pipeListener hands out the server ends of in-memory connections.
type pipeListener struct {
	conns     chan net.Conn
	closeOnce sync.Once
	closed    chan struct{}
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }

func (l *pipeListener) dial() net.Conn {
	client, server := net.Pipe()
	l.conns <- server
	return client
}

// answer is what a client sees of a response, less the Date.
type answer struct {
	status                                   int
	location, cacheControl, contentLength    string
	contentType, nosniff, connection, failed string
	close                                    bool
}

// ask sends head on a new connection and reads one response.
func ask(l *pipeListener, head []byte) answer {
	c := l.dial()
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	go func() { _, _ = c.Write(head) }()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return answer{failed: "no response"}
	}
	defer resp.Body.Close()
	h := resp.Header
	return answer{status: resp.StatusCode, location: h.Get("Location"), cacheControl: h.Get("Cache-Control"),
		contentLength: h.Get("Content-Length"), contentType: h.Get("Content-Type"), nosniff: h.Get("X-Content-Type-Options"),
		connection: h.Get("Connection"), close: resp.Close}
}

// FuzzFastPathMatchesNetHTTP feeds the same request head to a server with
// the redirect fast path in front of net/http and to net/http alone, and
// requires the same answer: status, Location, Cache-Control,
// Content-Length, Content-Type, nosniff and whether the connection closes.
func FuzzFastPathMatchesNetHTTP(f *testing.F) {
	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	links := &stubLinks{links: map[string]*link.Link{
		"abc":    {Code: "abc", URL: "https://example.com/a?b=c", Redirect: 302, CreatedAt: now},
		"perm":   {Code: "perm", URL: "https://example.org/", Redirect: 301, CreatedAt: now},
		"temp":   {Code: "temp", URL: "https://example.net/x", Redirect: 307, CreatedAt: now},
		"perm8":  {Code: "perm8", URL: "https://example.net/y", Redirect: 308, CreatedAt: now},
		"off":    {Code: "off", URL: "https://example.com/off", Redirect: 302, Disabled: true, CreatedAt: now},
		"gone":   {Code: "gone", URL: "https://example.com/gone", Redirect: 302, Deleted: true, CreatedAt: now},
		"old":    {Code: "old", URL: "https://example.com/old", Redirect: 302, ExpiresAt: now.Add(-time.Hour), CreatedAt: now},
		"my-ali": {Code: "my-ali", URL: "https://example.com/%E2%9C%93", Redirect: 302, CreatedAt: now},
		"frag":   {Code: "frag", URL: "https://example.com/f?x=1#top", Redirect: 302, CreatedAt: now},
		"noq":    {Code: "noq", URL: "https://example.com/noq", Redirect: 302, DropQuery: true, CreatedAt: now},
	}}
	s, err := New(Config{Links: links, Keys: stubKeys{}, PublicURL: "http://sho.rt", Now: func() time.Time { return now }})
	if err != nil {
		f.Fatal(err)
	}
	serve := func(ln net.Listener) *http.Server {
		srv := &http.Server{Handler: s, ReadHeaderTimeout: 2 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		return srv
	}
	plainLn, fastLn := newPipeListener(), newPipeListener()
	plain := serve(plainLn)
	fl := s.FastListener(fastLn, fastpath.Options{ReadHeaderTimeout: 2 * time.Second})
	fast := serve(fl)
	f.Cleanup(func() {
		_ = plain.Close()
		_ = fast.Close()
		_ = fl.Shutdown(context.Background())
	})
	// The harness itself: a plain redirect goes through the fast path on
	// one side and through net/http on the other.
	if a := ask(fastLn, []byte("GET /abc HTTP/1.1\r\nHost: sho.rt\r\n\r\n")); a.status != 302 || a.location != "https://example.com/a?b=c" {
		f.Fatalf("fast side answered %+v", a)
	}
	if served, _ := fl.Stats(); served != 1 {
		f.Fatalf("the fast path served %d requests, want 1", served)
	}
	// A query is forwarded by the fast path itself (the destination's b
	// wins).
	if a := ask(fastLn, []byte("GET /abc?b=9&utm=x HTTP/1.1\r\nHost: sho.rt\r\n\r\n")); a.location != "https://example.com/a?b=c&utm=x" {
		f.Fatalf("fast side answered %+v to a query", a)
	}
	if served, _ := fl.Stats(); served != 2 {
		f.Fatalf("the fast path served %d requests, want 2", served)
	}
	if a := ask(plainLn, []byte("GET /abc HTTP/1.1\r\nHost: sho.rt\r\n\r\n")); a.status != 302 {
		f.Fatalf("net/http side answered %+v", a)
	}
	for _, seed := range []string{
		"GET /abc HTTP/1.1\r\nHost: sho.rt\r\n\r\n",
		"HEAD /perm HTTP/1.1\r\nHost: sho.rt\r\nUser-Agent: x\r\n\r\n",
		"GET /temp?utm=1 HTTP/1.1\r\nHost: sho.rt\r\nConnection: close\r\n\r\n",
		"GET /perm8 HTTP/1.0\r\n\r\n",
		"GET /perm8 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
		"GET /off HTTP/1.1\r\nHost: sho.rt\r\nAccept: text/html\r\n\r\n",
		"GET /gone HTTP/1.1\r\nHost: sho.rt\r\n\r\n",
		"GET /old HTTP/1.1\r\nHost: sho.rt\r\n\r\n",
		"GET /nope HTTP/1.1\r\nHost: sho.rt\r\n\r\n",
		"GET /my-ali HTTP/1.1\r\nHost: sho.rt\r\nX-Forwarded-For: 1.2.3.4\r\nDNT: 1\r\n\r\n",
		"GET /abc HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
		"GET /abc HTTP/1.1\r\n\r\n",
		"GET /abc HTTP/1.1\r\nHost: sho.rt\r\n Folded: x\r\n\r\n",
		"get /abc HTTP/1.1\r\nHost: sho.rt\r\n\r\n",
		"GET /abc HTTP/2.0\r\nHost: sho.rt\r\n\r\n",
		"GET //abc HTTP/1.1\r\nHost: sho.rt\r\n\r\n",
		"GET /abc/ HTTP/1.1\r\nHost: sho.rt\r\n\r\n",
		"GET /a%62c HTTP/1.1\r\nHost: sho.rt\r\n\r\n",
		"GET http://sho.rt/abc HTTP/1.1\r\nHost: sho.rt\r\n\r\n",
		"GET /abc HTTP/1.1\r\nHost: sho.rt\r\nConnection: Close\r\n\r\n",
		"GET /healthz HTTP/1.1\r\nHost: sho.rt\r\n\r\n",
		"GET /abc?b=9&utm_source=x&%zz=1 HTTP/1.1\r\nHost: sho.rt\r\n\r\n",
		"GET /frag?x=2&y=%20 HTTP/1.1\r\nHost: sho.rt\r\n\r\n",
		"GET /noq?utm_source=x HTTP/1.1\r\nHost: sho.rt\r\n\r\n",
		"GET /abc?a=\xff&ok HTTP/1.1\r\nHost: sho.rt\r\n\r\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		head, _, ok := bytes.Cut(raw, []byte("\r\n\r\n"))
		if !ok || len(head) > 4096 {
			t.Skip("not one whole request head")
		}
		lower := strings.ToLower(string(head))
		if strings.Contains(lower, "content-length") || strings.Contains(lower, "transfer-encoding") || strings.Contains(lower, "expect") ||
			!strings.HasPrefix(lower, "get ") && !strings.HasPrefix(lower, "head ") {
			t.Skip("a body, or no redirect: the fast path never takes it")
		}
		req := append(append([]byte(nil), head...), "\r\n\r\n"...)
		want, got := ask(plainLn, req), ask(fastLn, req)
		if got != want {
			t.Fatalf("request %q:\nnet/http:  %+v\nfast path: %+v", req, want, got)
		}
	})
}
