// Package peertls authenticates the members of a cluster to each other on
// the peer port: mutual TLS 1.3 whose certificates chain to the cluster's
// CA and name the node ID they speak for (the certificate's Common Name).
//
// The CA comes from the cluster key (internal/clusterkey): each node issues
// itself a short-lived certificate, renewed at half its lifetime, so there
// is no file to distribute but the key. Operators who run their own PKI give
// a CA bundle, a certificate and its key instead; the certificate must then
// name the node's ID.
package peertls

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/linkraft/linkraft/internal/clusterkey"
)

// ErrPeer is wrapped by every refusal of a peer's certificate.
var ErrPeer = errors.New("peertls: peer not a member")

// Config configures an Identity. Give ClusterKey, or all three files.
type Config struct {
	// NodeID is the ID this node's certificate names.
	NodeID string
	// ClusterKey derives the CA and lets the node issue its own
	// certificates.
	ClusterKey *clusterkey.Key
	// CAFile, CertFile and KeyFile are PEM files of an operator's PKI: the
	// CA bundle that peers' certificates must chain to, and this node's
	// certificate (naming NodeID) and private key.
	CAFile, CertFile, KeyFile string
	// Incarnation is the ID of this node's data dir; self-issued
	// certificates carry it (a URI SAN linkraft:incarnation:<id>) so that
	// peers can refuse a node that lost its state and came back under its
	// old ID.
	Incarnation string
	// VerifyPeer, if set, is called after a peer's certificate chain is
	// verified, with the node ID and incarnation it names ("" when it
	// names none, as an operator's certificate may not); an error refuses
	// the connection.
	VerifyPeer func(nodeID, incarnation string) error
	// Lifetime of self-issued certificates (default 24 h).
	Lifetime time.Duration
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
}

// Identity is a node's peer-port identity: what it presents and whom it
// trusts.
type Identity struct {
	nodeID   string
	inc      string
	verify   func(nodeID, incarnation string) error
	roots    *x509.CertPool
	now      func() time.Time
	lifetime time.Duration
	keyID    string

	// self-issued (ClusterKey)
	caCert *x509.Certificate
	caKey  ed25519.PrivateKey

	mu      sync.Mutex
	current *tls.Certificate
	renewAt time.Time
}

// New builds the identity of cfg.NodeID.
func New(cfg Config) (*Identity, error) {
	if cfg.NodeID == "" {
		return nil, errors.New("peertls: NodeID is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Lifetime <= 0 {
		cfg.Lifetime = 24 * time.Hour
	}
	id := &Identity{nodeID: cfg.NodeID, inc: cfg.Incarnation, verify: cfg.VerifyPeer, now: cfg.Now, lifetime: cfg.Lifetime, roots: x509.NewCertPool()}
	files := cfg.CAFile != "" || cfg.CertFile != "" || cfg.KeyFile != ""
	switch {
	case files:
		if cfg.CAFile == "" || cfg.CertFile == "" || cfg.KeyFile == "" {
			return nil, errors.New("peertls: -peer-tls-ca, -peer-tls-cert and -peer-tls-key go together")
		}
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("peertls: -peer-tls-ca: %w", err)
		}
		if !id.roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("peertls: -peer-tls-ca %s holds no PEM certificate", cfg.CAFile)
		}
		cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("peertls: -peer-tls-cert %s, -peer-tls-key %s: %w: give this node's PEM certificate and the key it was issued for", cfg.CertFile, cfg.KeyFile, err)
		}
		if cert.Leaf == nil {
			if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
				return nil, fmt.Errorf("peertls: certificate: %w", err)
			}
		}
		if err := id.check(cert.Leaf, cert.Certificate[1:]); err != nil {
			return nil, fmt.Errorf("peertls: this node's own certificate %s: %w", cfg.CertFile, err)
		}
		if got := cert.Leaf.Subject.CommonName; got != cfg.NodeID {
			return nil, fmt.Errorf("peertls: certificate %s names node %q (its Common Name), not this node %q", cfg.CertFile, got, cfg.NodeID)
		}
		id.current = &cert
		id.renewAt = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	case cfg.ClusterKey != nil:
		ca, caKey, err := cfg.ClusterKey.CA()
		if err != nil {
			return nil, err
		}
		id.caCert, id.caKey, id.keyID = ca, caKey, cfg.ClusterKey.ID()
		id.roots.AddCert(ca)
		if _, err := id.certificate(); err != nil {
			return nil, err
		}
	default:
		return nil, errors.New("peertls: a cluster key or the three PKI files are required")
	}
	return id, nil
}

// NodeID returns the ID this identity speaks for.
func (id *Identity) NodeID() string { return id.nodeID }

// certificate returns the current certificate, issuing a new one when the
// current has lived half its life.
func (id *Identity) certificate() (*tls.Certificate, error) {
	id.mu.Lock()
	defer id.mu.Unlock()
	now := id.now()
	if id.current != nil && now.Before(id.renewAt) {
		return id.current, nil
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	skid := sha256.Sum256(pub)
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			CommonName: id.nodeID, Organization: []string{"linkraft"},
			OrganizationalUnit: []string{"cluster " + id.keyID},
		},
		// An hour back covers clock skew between members.
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(id.lifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		SubjectKeyId: skid[:20],
	}
	if id.inc != "" {
		tmpl.URIs = []*url.URL{{Scheme: "linkraft", Opaque: incarnationPrefix + id.inc}}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, id.caCert, pub, id.caKey)
	if err != nil {
		return nil, fmt.Errorf("peertls: issue certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	id.current = &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv, Leaf: leaf}
	id.renewAt = now.Add(id.lifetime / 2)
	return id.current, nil
}

// check verifies that leaf chains to the roots and names a node.
func (id *Identity) check(leaf *x509.Certificate, intermediates [][]byte) error {
	pool := x509.NewCertPool()
	for _, der := range intermediates {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return fmt.Errorf("%w: intermediate certificate: %w", ErrPeer, err)
		}
		pool.AddCert(c)
	}
	_, err := leaf.Verify(x509.VerifyOptions{
		Roots: id.roots, Intermediates: pool, CurrentTime: id.now(),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrPeer, err)
	}
	if !validNodeID(leaf.Subject.CommonName) {
		return fmt.Errorf("%w: certificate names no valid node ID (Common Name %q)", ErrPeer, leaf.Subject.CommonName)
	}
	return nil
}

func validNodeID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func (id *Identity) verifyConnection(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return fmt.Errorf("%w: no certificate", ErrPeer)
	}
	raw := make([][]byte, 0, len(cs.PeerCertificates)-1)
	for _, c := range cs.PeerCertificates[1:] {
		raw = append(raw, c.Raw)
	}
	leaf := cs.PeerCertificates[0]
	if err := id.check(leaf, raw); err != nil {
		return err
	}
	if id.verify != nil {
		if err := id.verify(leaf.Subject.CommonName, Incarnation(leaf)); err != nil {
			return fmt.Errorf("%w: %w", ErrPeer, err)
		}
	}
	return nil
}

const incarnationPrefix = "incarnation:"

// Incarnation returns the data-dir incarnation a certificate names, or "".
func Incarnation(c *x509.Certificate) string {
	for _, u := range c.URIs {
		if u.Scheme == "linkraft" && strings.HasPrefix(u.Opaque, incarnationPrefix) {
			return strings.TrimPrefix(u.Opaque, incarnationPrefix)
		}
	}
	return ""
}

// ServerConfig is the peer port's TLS configuration: TLS 1.3, a client
// certificate required and verified.
func (id *Identity) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		ClientAuth: tls.RequireAnyClientCert, // verified by VerifyConnection
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return id.certificate()
		},
		VerifyConnection: id.verifyConnection,
	}
}

// ClientConfig is the dialing side's TLS configuration: the server's
// certificate must chain to the same CA and name a node.
func (id *Identity) ClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		// Peers are dialled by address; who answers is checked by
		// VerifyConnection against the cluster CA instead of a host name.
		InsecureSkipVerify: true, //nolint:gosec // verified in VerifyConnection
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return id.certificate()
		},
		VerifyConnection: id.verifyConnection,
	}
}

// PeerNodeID returns the node ID that conn's verified certificate names; ok
// is false for a connection that is not TLS or not yet handshaken.
func PeerNodeID(conn net.Conn) (string, bool) {
	tc, ok := conn.(*tls.Conn)
	if !ok {
		return "", false
	}
	cs := tc.ConnectionState()
	if !cs.HandshakeComplete || len(cs.PeerCertificates) == 0 {
		return "", false
	}
	return cs.PeerCertificates[0].Subject.CommonName, true
}
