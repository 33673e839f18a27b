package main

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/linkraft/linkraft/internal/certfile/certtest"
	"github.com/linkraft/linkraft/internal/testkit"
)

// TestServesHTTPSWithTheBinary starts the built binary with -tls-cert and
// -tls-key and uses the API over HTTPS with HTTP/2 and HTTP/1.1.
func TestServesHTTPSWithTheBinary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile, certPEM := certtest.Write(t, dir, 7)
	a := newAddrs(t)
	launchProc(t, filepath.Join(dir, "data"), a, "-tls-cert", certFile, "-tls-key", keyFile)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	h2 := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	h1 := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool},
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	base := "https://" + a.http
	do := func(c *http.Client, method, path, body string) (*http.Response, string) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testAdminKey)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := c.Do(req)
		if err != nil {
			return nil, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	testkit.WaitFor(t, 60*time.Second, "the HTTPS API", func() bool {
		resp, _ := do(h2, "GET", "/api/v1/keys", "")
		return resp != nil && resp.StatusCode == 200
	})
	resp, body := do(h2, "POST", "/api/v1/links", `{"url":"https://example.com/tls","alias":"tls-link"}`)
	if resp == nil || resp.StatusCode != 201 || resp.Proto != "HTTP/2.0" || !strings.Contains(body, `"short_url":"https://localhost:`) {
		t.Fatalf("create over HTTP/2: %v %s", resp, body)
	}
	resp, _ = do(h1, "GET", "/tls-link", "")
	if resp == nil || resp.StatusCode != 302 || resp.Proto != "HTTP/1.1" || resp.Header.Get("Location") != "https://example.com/tls" {
		t.Fatalf("redirect over HTTP/1.1: %v", resp)
	}
	// Plain HTTP on the TLS port gets nowhere.
	if r, err := http.Get("http://" + a.http + "/tls-link"); err == nil {
		r.Body.Close()
		if r.StatusCode == 302 {
			t.Fatal("plain HTTP was served on the TLS port")
		}
	}
}
