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

	"github.com/linkraft/linkraft/internal/connguard"
)

// TestStartingServerAnswersWhatItAccepted is the handover from the
// starting server to the real one: a client whose connection the starting
// server accepted, and whose request arrives after the handover began,
// gets an answer (503, to retry), never a closed connection. A POST that
// meets a closed connection cannot know whether it was taken (CI saw a
// create fail with EOF at that moment).
func TestStartingServerAnswersWhatItAccepted(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	limited := connguard.New(ln, connguard.Config{Max: 64})
	const early = 4
	accepted := make(chan struct{}, early)
	stop := startingServer(earlyConfig{Limited: limited, Status: func() string { return "waiting" },
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				accepted <- struct{}{}
			}
		}})
	var conns []net.Conn
	for i := 0; i < early; i++ {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	for i := 0; i < early; i++ {
		select {
		case <-accepted:
		case <-time.After(10 * time.Second):
			t.Fatalf("the starting server accepted %d of %d connections", i, early)
		}
	}
	stop()
	real := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ready")
	})}
	go func() { _ = real.Serve(limited) }()
	defer real.Close()

	const post = "POST /api/v1/links HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
	for i, c := range conns {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, post); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("connection %d, accepted before the handover: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "starting: waiting") {
			t.Fatalf("connection %d: %d %s", i, resp.StatusCode, b)
		}
		if !resp.Close {
			t.Fatalf("connection %d: a starting answer must close the connection", i)
		}
	}
	// New connections go to the real server.
	resp, err := http.Get(fmt.Sprintf("http://%s/", ln.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "ready" {
		t.Fatalf("after the handover: %d %s", resp.StatusCode, b)
	}
}
