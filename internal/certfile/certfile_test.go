package certfile

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/linkraft/linkraft/internal/certfile/certtest"
	"github.com/linkraft/linkraft/internal/testkit"
)

// writePair writes a self-signed pair for 127.0.0.1 into dir.
func writePair(t *testing.T, dir string, serial int64) []byte {
	_, _, certPEM := certtest.Write(t, dir, serial)
	return certPEM
}

func TestServesHTTP1AndHTTP2AndReloads(t *testing.T) {
	dir := t.TempDir()
	first := writePair(t, dir, 1)
	r, err := New(Config{CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem")})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{TLSConfig: r.TLSConfig(), ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { _, _ = io.WriteString(w, req.Proto) })}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })

	client := func(certPEM []byte, h2 bool) *http.Client {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(certPEM)
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: h2}
		if !h2 {
			tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		}
		return &http.Client{Transport: tr, Timeout: 5 * time.Second}
	}
	url := "https://" + ln.Addr().String() + "/"
	for _, c := range []struct {
		h2   bool
		want string
	}{{false, "HTTP/1.1"}, {true, "HTTP/2.0"}} {
		resp, err := client(first, c.h2).Get(url)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != c.want {
			t.Fatalf("served %q, want %q", b, c.want)
		}
	}
	// A renewed pair is served without a restart; a client that trusts
	// only the new certificate gets through once it is picked up.
	second := writePair(t, dir, 2)
	testkit.Eventually(t, 10*time.Second, func() error {
		resp, err := client(second, false).Get(url)
		if err != nil {
			return fmt.Errorf("the renewed certificate is not served: %w", err)
		}
		resp.Body.Close()
		return nil
	})
	// A broken renewal keeps the last good certificate in service.
	if err := os.WriteFile(filepath.Join(dir, "cert.pem"), []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := r.GetCertificate(nil)
	if err != nil || c == nil {
		t.Fatalf("after a broken renewal: %v", err)
	}
	if _, err := New(Config{CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem")}); err == nil {
		t.Fatal("a broken pair was accepted at start")
	}
}
