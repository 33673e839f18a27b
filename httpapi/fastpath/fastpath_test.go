package fastpath

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// stubHandler redirects /abc with 302 and declines everything else.
type stubHandler struct {
	mu     sync.Mutex
	served []string
}

func (h *stubHandler) Redirect(r *Request) (Answer, bool) {
	if string(r.Segment) != "abc" {
		return Answer{}, false
	}
	return Answer{Status: http.StatusFound, Location: "https://example.com/x", CacheControl: "private, max-age=90"}, true
}

func (h *stubHandler) Served(r *Request, a Answer, start time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.served = append(h.served, string(r.Segment)+" "+string(r.UserAgent))
}

// TestFastAnswersAndHandsTheRestToNetHTTP: on one keep-alive connection,
// pipelined, the fast path answers /abc itself and hands the declined
// request, and every byte after it, to net/http.
func TestFastAnswersAndHandsTheRestToNetHTTP(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &stubHandler{}
	fl := New(ln, h, Options{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "net/http "+r.Method+" "+r.URL.Path)
	})}
	go srv.Serve(fl)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		fl.Shutdown(ctx)
	})
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET /abc HTTP/1.1\r\nHost: x\r\nUser-Agent: ua1\r\n\r\n"+
		"HEAD /abc HTTP/1.1\r\nHost: x\r\n\r\n"+
		"GET /other HTTP/1.1\r\nHost: x\r\n\r\n"+
		"POST /abc HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi")
	br := bufio.NewReader(c)
	want := []struct {
		status int
		body   string
	}{{302, ""}, {302, ""}, {200, "net/http GET /other"}, {200, "net/http POST /abc"}}
	for i, w := range want {
		method := "GET"
		if i == 1 {
			method = "HEAD"
		}
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != w.status || string(body) != w.body {
			t.Fatalf("response %d = %d %q, want %d %q", i, resp.StatusCode, body, w.status, w.body)
		}
		if w.status == 302 && (resp.Header.Get("Location") != "https://example.com/x" || resp.Header.Get("Cache-Control") != "private, max-age=90") {
			t.Fatalf("response %d headers: %v", i, resp.Header)
		}
	}
	served, handed := fl.Stats()
	if served != 2 || handed != 1 {
		t.Fatalf("stats: served %d, handed %d; want 2 and 1", served, handed)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if strings.Join(h.served, ",") != "abc ua1,abc " {
		t.Fatalf("Served calls: %q", h.served)
	}
}

// TestParseHeadDeclines lists heads the fast path leaves to net/http.
func TestParseHeadDeclines(t *testing.T) {
	t.Parallel()
	for _, head := range []string{
		"POST /abc HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /a/b HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /a%62 HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /abc HTTP/2.0\r\nHost: x\r\n\r\n",
		"GET /abc HTTP/1.1\r\n\r\n", // no Host
		"GET /abc HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
		"GET /abc HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
		"GET /abc HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n",
		"GET /abc HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n",
		"GET /abc HTTP/1.1\r\nHost: x\r\nForwarded: for=1.2.3.4\r\nX-Forwarded-For: 5.6.7.8\r\n\r\n",
		"GET /abc HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\n\r\n",
		"GET /abc?a#b HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		var r Request
		if parseHead([]byte(head), &r) {
			t.Errorf("parseHead accepted %q", head)
		}
	}
	var r Request
	if !parseHead([]byte("GET /abc?utm=1 HTTP/1.0\r\nUser-Agent: u\r\nDNT: 1\r\nForwarded: \r\n\r\n"), &r) ||
		string(r.Segment) != "abc" || !r.Private || !r.close || r.Forwarded == nil || string(r.UserAgent) != "u" {
		t.Fatalf("parseHead: %+v", r)
	}
}
