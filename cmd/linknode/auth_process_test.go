package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/internal/testkit"
)

// send makes one request with an optional key; it returns status and body.
func send(tb testing.TB, method, url, key, contentType string, body []byte) (int, string) {
	tb.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestStrangerGetsNowhere runs the built binary as a newcomer would (no key
// given: it makes admin.key) and replays, without credentials, every attack
// that once worked against it (issue 14's "Why").
func TestStrangerGetsNowhere(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := newAddrs(t)
	p := launchProcEnv(t, nil, dir, a)
	keyFile := filepath.Join(dir, "admin.key")
	var key string
	testkit.Eventually(t, 60*time.Second, func() (err error) {
		key, err = apikey.LoadSecret(keyFile)
		return err
	})
	if st, err := os.Stat(keyFile); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("admin.key: %v %v", st.Mode(), err)
	}
	if strings.Contains(p.logs(), key) {
		t.Fatal("the admin key is in the log")
	}
	const js = "application/json"
	testkit.Eventually(t, 30*time.Second, func() error {
		if status, _ := send(t, "POST", p.base+"/api/v1/links", key, js, []byte(`{"url":"https://example.com/real","alias":"victim"}`)); status != 201 {
			return fmt.Errorf("create with admin.key: %d", status)
		}
		return nil
	})
	attacks := []struct {
		name, method, url, ct, body string
		want                        int
	}{
		{"re-point a link", "PATCH", p.base + "/api/v1/links/victim", js, `{"url":"https://phish.example/login"}`, 401},
		{"delete a link", "DELETE", p.base + "/api/v1/links/victim", "", "", 401},
		{"dump every link", "GET", p.base + "/admin/v1/links", "", "", 404},
		{"dump every link on the admin port", "GET", p.admin + "/admin/v1/links", "", "", 401},
		{"remove a node", "DELETE", p.base + "/admin/v1/nodes/n2", "", "", 404},
		{"remove a node on the admin port", "DELETE", p.admin + "/admin/v1/nodes/n2", "", "", 401},
		{"read stats", "GET", p.base + "/api/v1/links/victim/stats", "", "", 401},
		{"read raw visits", "GET", p.base + "/api/v1/links/victim/visits", "", "", 401},
		{"create", "POST", p.base + "/api/v1/links", js, `{"url":"https://example.com/spam"}`, 401},
		{"bulk write", "POST", p.base + "/api/v1/links/bulk", js, `{"links":[` + strings.Repeat(`{"url":"https://example.com/x"},`, 20000) + `{"url":"https://example.com/y"}]}`, 401},
		{"make a key", "POST", p.base + "/api/v1/keys", js, `{"name":"me","owner":"me","scopes":["admin"]}`, 401},
		{"forge a key", "GET", p.base + "/api/v1/keys", "", "", 401},
		{"metrics on the public port", "GET", p.base + "/metrics", "", "", 404},
	}
	for _, at := range attacks {
		got, body := send(t, at.method, at.url, "", at.ct, []byte(at.body))
		if got != at.want {
			t.Errorf("%s: %d, want %d: %s", at.name, got, at.want, body)
		}
	}
	// 300 creates in a burst without a key: none gets through.
	for i := 0; i < 300; i++ {
		if got, _ := send(t, "POST", p.base+"/api/v1/links", "", js, []byte(fmt.Sprintf(`{"url":"https://example.com/%d"}`, i))); got != 401 {
			t.Fatalf("keyless create %d: %d", i, got)
		}
	}
	// The link is as it was, and public redirects work without a key.
	if got, body := send(t, "GET", p.base+"/api/v1/links/victim", key, "", nil); got != 200 || !strings.Contains(body, `"url":"https://example.com/real"`) {
		t.Fatalf("victim after the attacks: %d %s", got, body)
	}
	req, _ := http.NewRequest("GET", p.base+"/victim", nil)
	resp, err := client.Do(req)
	if err != nil || resp.StatusCode != 302 || resp.Header.Get("Location") != "https://example.com/real" {
		t.Fatalf("redirect: %v %v", resp, err)
	}
	resp.Body.Close()
}
