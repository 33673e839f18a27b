// Package clusterkey is the one secret that makes a set of linknodes a
// cluster. Every member holds the same 32 random bytes; from them each node
// derives, with HKDF-SHA256 and a distinct label per use, the memberlist
// gossip key, the cluster's certificate authority (an Ed25519 key and a
// self-signed certificate that every node builds bit for bit alike) and the
// key's public ID. Nothing derived reveals the key, and no two uses share
// bytes.
//
// The key travels as base64 in a file (linknode -cluster-key-file) or in
// LINKNODE_CLUSTER_KEY, never as a flag value, which ps would show.
package clusterkey

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"os"
	"strings"
	"time"

	"github.com/linkraft/linkraft/internal/atomicfile"
)

// Size is the key's length in bytes.
const Size = 32

// Key is a cluster key.
type Key [Size]byte

// ErrInvalid is wrapped by every error about a malformed key.
var ErrInvalid = errors.New("clusterkey: invalid key")

// Generate returns a new random key.
func Generate() (Key, error) {
	var k Key
	if _, err := rand.Read(k[:]); err != nil {
		return Key{}, err
	}
	return k, nil
}

// Parse decodes a base64 key (standard or URL alphabet, padding optional,
// surrounding white space ignored).
func Parse(s string) (Key, error) {
	s = strings.TrimSpace(s)
	var b []byte
	var err error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err = enc.DecodeString(s); err == nil {
			break
		}
	}
	if err != nil {
		return Key{}, fmt.Errorf("%w: not base64 (make one with linknode keygen)", ErrInvalid)
	}
	if len(b) != Size {
		return Key{}, fmt.Errorf("%w: %d bytes, want %d (make one with linknode keygen)", ErrInvalid, len(b), Size)
	}
	var k Key
	copy(k[:], b)
	if k == (Key{}) {
		return Key{}, fmt.Errorf("%w: all zero", ErrInvalid)
	}
	return k, nil
}

// Load reads a key file. The file holds the base64 key (a trailing newline
// is fine); a file others may read is refused, since whoever reads it is a
// member of the cluster.
func Load(path string) (Key, error) {
	st, err := os.Stat(path)
	if err != nil {
		return Key{}, fmt.Errorf("cluster key file: %w", err)
	}
	if st.IsDir() {
		return Key{}, fmt.Errorf("cluster key file %s is a directory, not a key file", path)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return Key{}, fmt.Errorf("cluster key file %s: mode %v lets other users (its group or everyone) read it; chmod 600 it, owned by the user linknode runs as", path, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Key{}, fmt.Errorf("cluster key file: %w", err)
	}
	k, err := Parse(string(b))
	if err != nil {
		return Key{}, fmt.Errorf("cluster key file %s: %w", path, err)
	}
	return k, nil
}

// Save writes k to path, mode 0600, failing if the file exists.
func Save(path string, k Key) error {
	return atomicfile.Create(path, []byte(k.String()+"\n"), 0o600)
}

// String returns the key in standard base64, the form Parse and Load read.
func (k Key) String() string { return base64.StdEncoding.EncodeToString(k[:]) }

// GoString hides the key from %#v.
func (k Key) GoString() string { return "clusterkey.Key{" + k.ID() + "}" }

// Format keeps the key out of logs: every verb prints its ID.
func (k Key) Format(f fmt.State, verb rune) { _, _ = f.Write([]byte("key:" + k.ID())) }

func (k Key) derive(label string, n int) []byte {
	b, err := hkdf.Key(sha256.New, k[:], nil, label, n)
	if err != nil {
		panic(err) // only for n > 255*32
	}
	return b
}

// Labels of the derived values; changing one changes every cluster's
// derived value, so they are fixed.
const (
	labelGossip = "linkraft gossip key v1"
	labelCA     = "linkraft cluster ca v1"
	labelID     = "linkraft cluster key id v1"
	labelUI     = "linkraft web ui sessions v1"
)

// SessionKey returns the 32-byte key that signs the web UI's session
// cookies and CSRF tokens (HMAC-SHA256): every member derives the same, so
// a session made on one node is good on all of them.
func (k Key) SessionKey() []byte { return k.derive(labelUI, 32) }

// GossipKey returns the 32-byte memberlist encryption key (AES-256-GCM).
func (k Key) GossipKey() []byte { return k.derive(labelGossip, 32) }

// ID returns the key's public fingerprint: 16 hex digits that name it in
// certificates and logs without revealing it.
func (k Key) ID() string { return hex.EncodeToString(k.derive(labelID, 8)) }

// CA returns the cluster's certificate authority: its private key and its
// self-signed certificate. Both are a pure function of k (Ed25519 signing
// is deterministic and every field is fixed), so every member builds the
// same certificate and trusts the others' without any file to share.
func (k Key) CA() (*x509.Certificate, ed25519.PrivateKey, error) {
	priv := ed25519.NewKeyFromSeed(k.derive(labelCA, ed25519.SeedSize))
	pub := priv.Public().(ed25519.PublicKey)
	skid := sha256.Sum256(pub)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "linkraft cluster CA " + k.ID(), Organization: []string{"linkraft"}},
		NotBefore:             time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:              time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
		SubjectKeyId:          skid[:20],
	}
	der, err := x509.CreateCertificate(nil, tmpl, tmpl, pub, priv)
	if err != nil {
		return nil, nil, fmt.Errorf("clusterkey: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return cert, priv, nil
}
