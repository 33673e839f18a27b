package peertls

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linkraft/linkraft/internal/clusterkey"
)

// handshake runs one TLS handshake over loopback between a server and a
// client identity and returns both sides' errors and the node ID the server
// saw.
func handshake(t *testing.T, server, client *tls.Config) (serverErr, clientErr error, seen string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		err  error
		seen string
	}
	done := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer c.Close()
		tc := tls.Server(c, server)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = tc.HandshakeContext(ctx)
		id, _ := PeerNodeID(tc)
		done <- result{err: err, seen: id}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	tc := tls.Client(c, client)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	clientErr = tc.HandshakeContext(ctx)
	if clientErr == nil {
		// TLS 1.3: the client finishes before the server has checked its
		// certificate; a read surfaces the server's verdict.
		_ = tc.SetReadDeadline(time.Now().Add(time.Second))
		var b [1]byte
		if _, err := tc.Read(b[:]); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, io.EOF) {
			clientErr = err
		}
	}
	tc.Close()
	r := <-done
	return r.err, clientErr, r.seen
}

// presenting is a client that trusts any server and presents id's
// certificate: it tests the server's check alone.
func presenting(id *Identity) *tls.Config {
	return &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13, GetClientCertificate: id.ClientConfig().GetClientCertificate}
}

func identity(t *testing.T, cfg Config) *Identity {
	t.Helper()
	id, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestMembersOfOneKeyAuthenticateEachOther(t *testing.T) {
	t.Parallel()
	k, _ := clusterkey.Generate()
	n1 := identity(t, Config{NodeID: "n1", ClusterKey: &k})
	n2 := identity(t, Config{NodeID: "n2", ClusterKey: &k})
	serr, cerr, seen := handshake(t, n1.ServerConfig(), n2.ClientConfig())
	if serr != nil || cerr != nil {
		t.Fatalf("handshake: server %v, client %v", serr, cerr)
	}
	if seen != "n2" {
		t.Fatalf("server saw node %q, want n2", seen)
	}
}

func TestAnotherKeyIsRefusedBothWays(t *testing.T) {
	t.Parallel()
	k1, _ := clusterkey.Generate()
	k2, _ := clusterkey.Generate()
	member := identity(t, Config{NodeID: "n1", ClusterKey: &k1})
	stranger := identity(t, Config{NodeID: "n1", ClusterKey: &k2})
	serr, _, _ := handshake(t, member.ServerConfig(), presenting(stranger))
	if !errors.Is(serr, ErrPeer) {
		t.Fatalf("server accepted a stranger's certificate: %v", serr)
	}
	_, cerr, _ := handshake(t, stranger.ServerConfig(), member.ClientConfig())
	if cerr == nil {
		t.Fatal("client accepted a stranger server")
	}
}

func TestClientWithoutCertificateIsRefused(t *testing.T) {
	t.Parallel()
	k, _ := clusterkey.Generate()
	member := identity(t, Config{NodeID: "n1", ClusterKey: &k})
	serr, _, _ := handshake(t, member.ServerConfig(), &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})
	if serr == nil {
		t.Fatal("server accepted a client with no certificate")
	}
	// TLS 1.2 is refused outright.
	serr, _, _ = handshake(t, member.ServerConfig(), &tls.Config{
		InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12,
		GetClientCertificate: member.ClientConfig().GetClientCertificate,
	})
	if serr == nil {
		t.Fatal("server accepted TLS 1.2")
	}
}

func TestCertificatesExpireAndRenew(t *testing.T) {
	t.Parallel()
	k, _ := clusterkey.Generate()
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	old := identity(t, Config{NodeID: "n1", ClusterKey: &k, Lifetime: time.Hour, Now: clock})
	first, _ := old.certificate()
	now.Add(int64(40 * time.Minute))
	renewed, _ := old.certificate()
	if renewed == first {
		t.Fatal("certificate not renewed past half its life")
	}
	// A peer whose clock is two hours on sees an expired certificate from
	// an identity that stopped renewing.
	stale := identity(t, Config{NodeID: "n3", ClusterKey: &k, Lifetime: time.Hour, Now: func() time.Time { return time.Now() }})
	stale.mu.Lock()
	stale.renewAt = time.Now().Add(24 * time.Hour) // never renew
	stale.mu.Unlock()
	future := identity(t, Config{NodeID: "n2", ClusterKey: &k, Now: func() time.Time { return time.Now().Add(2 * time.Hour) }})
	serr, _, _ := handshake(t, future.ServerConfig(), presenting(stale))
	if !errors.Is(serr, ErrPeer) || !strings.Contains(serr.Error(), "expired") {
		t.Fatalf("expired certificate: %v", serr)
	}
}

// writePKI makes an operator CA and a certificate for cn, and returns the
// three file paths.
func writePKI(t *testing.T, dir, cn string) (caFile, certFile, keyFile string) {
	t.Helper()
	caPub, caPriv, _ := ed25519.GenerateKey(rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ops CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caPub, caPriv)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, pub, caPriv)
	if err != nil {
		t.Fatal(err)
	}
	pk, _ := x509.MarshalPKCS8PrivateKey(priv)
	caFile, certFile, keyFile = filepath.Join(dir, "ca.pem"), filepath.Join(dir, cn+".pem"), filepath.Join(dir, cn+"-key.pem")
	for p, b := range map[string][]byte{
		caFile:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		certFile: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyFile:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk}),
	} {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return caFile, certFile, keyFile
}

func TestOperatorPKI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, cert, key := writePKI(t, dir, "n7")
	if _, err := New(Config{NodeID: "n8", CAFile: ca, CertFile: cert, KeyFile: key}); err == nil || !strings.Contains(err.Error(), `names node "n7"`) {
		t.Fatalf("a certificate naming another node was accepted: %v", err)
	}
	if _, err := New(Config{NodeID: "n7", CAFile: ca, CertFile: cert}); err == nil {
		t.Fatal("a partial PKI configuration was accepted")
	}
	id := identity(t, Config{NodeID: "n7", CAFile: ca, CertFile: cert, KeyFile: key})
	serr, cerr, seen := handshake(t, id.ServerConfig(), id.ClientConfig())
	if serr != nil || cerr != nil || seen != "n7" {
		t.Fatalf("operator PKI handshake: %v %v %q", serr, cerr, seen)
	}
	// A certificate of the cluster-key CA does not pass the operator CA.
	k, _ := clusterkey.Generate()
	other := identity(t, Config{NodeID: "n1", ClusterKey: &k})
	if serr, _, _ := handshake(t, id.ServerConfig(), presenting(other)); !errors.Is(serr, ErrPeer) {
		t.Fatalf("foreign CA accepted: %v", serr)
	}
}

func TestIncarnationIsInTheCertificateAndChecked(t *testing.T) {
	t.Parallel()
	k, _ := clusterkey.Generate()
	refuse := errors.New("known with another incarnation")
	var seenID, seenInc string
	server := identity(t, Config{NodeID: "n1", ClusterKey: &k, Incarnation: "aaaa", VerifyPeer: func(id, inc string) error {
		seenID, seenInc = id, inc
		if inc != "bbbb" {
			return refuse
		}
		return nil
	}})
	good := identity(t, Config{NodeID: "n2", ClusterKey: &k, Incarnation: "bbbb"})
	wiped := identity(t, Config{NodeID: "n2", ClusterKey: &k, Incarnation: "cccc"})
	if serr, cerr, _ := handshake(t, server.ServerConfig(), good.ClientConfig()); serr != nil || cerr != nil {
		t.Fatalf("registered incarnation refused: %v %v", serr, cerr)
	}
	if seenID != "n2" || seenInc != "bbbb" {
		t.Fatalf("VerifyPeer saw %q %q", seenID, seenInc)
	}
	if serr, _, _ := handshake(t, server.ServerConfig(), presenting(wiped)); !errors.Is(serr, refuse) {
		t.Fatalf("another incarnation: %v", serr)
	}
}
