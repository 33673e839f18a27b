package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServesHTTPSWithTheBinary starts the built binary with -tls-cert and
// -tls-key and uses the API over HTTPS with HTTP/2 and HTTP/1.1.
func TestServesHTTPSWithTheBinary(t *testing.T) {
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "linkraft"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	a := newAddrs(t)
	p := launchProc(t, filepath.Join(dir, "data"), a, "-tls-cert", certFile, "-tls-key", keyFile)
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
	for deadline := time.Now().Add(60 * time.Second); ; {
		if resp, _ := do(h2, "GET", "/api/v1/keys", ""); resp != nil && resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no HTTPS API after 60 s\n%s", p.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
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
