package clusterkey

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseRoundTripAndRefusals(t *testing.T) {
	t.Parallel()
	k, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse("  " + k.String() + "\n")
	if err != nil || got != k {
		t.Fatalf("Parse(String()) = %v, %v", got.ID(), err)
	}
	for _, bad := range []string{"", "not base64!", "AAAA", strings.Repeat("A", 43) + "=", k.String()[:20]} {
		if _, err := Parse(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestDerivationsAreDistinctAndStable(t *testing.T) {
	t.Parallel()
	k1, _ := Generate()
	k2, _ := Generate()
	if bytes.Equal(k1.GossipKey(), k2.GossipKey()) || k1.ID() == k2.ID() {
		t.Fatal("two keys derived the same value")
	}
	if bytes.Equal(k1.GossipKey(), k1[:]) || bytes.Contains([]byte(k1.ID()), []byte(k1.String())) {
		t.Fatal("a derived value is the key itself")
	}
	if bytes.Equal(k1.SessionKey(), k2.SessionKey()) || bytes.Equal(k1.SessionKey(), k1.GossipKey()) || !bytes.Equal(k1.SessionKey(), k1.SessionKey()) {
		t.Fatal("session keys are not one per cluster key and distinct from its other uses")
	}
	if len(k1.GossipKey()) != 32 || len(k1.ID()) != 16 || len(k1.SessionKey()) != 32 {
		t.Fatalf("gossip key %d bytes, id %q", len(k1.GossipKey()), k1.ID())
	}
	a, _, err := k1.CA()
	if err != nil {
		t.Fatal(err)
	}
	b, _, _ := k1.CA()
	c, _, _ := k2.CA()
	if !bytes.Equal(a.Raw, b.Raw) {
		t.Fatal("the CA certificate of one key differs between two builds")
	}
	if bytes.Equal(a.Raw, c.Raw) {
		t.Fatal("two keys built the same CA")
	}
	if !a.IsCA || a.CheckSignatureFrom(a) != nil {
		t.Fatal("CA certificate is not a valid self-signed CA")
	}
}

func TestFormatNeverPrintsTheKey(t *testing.T) {
	t.Parallel()
	k, _ := Generate()
	for _, verb := range []string{"%v", "%s", "%x", "%#v", "%+v", "%q"} {
		out := fmt.Sprintf(verb, k)
		if strings.Contains(out, k.String()) || strings.Contains(out, fmt.Sprintf("%x", k[:])) {
			t.Errorf("%s printed the key: %s", verb, out)
		}
	}
}

func TestLoadAndSave(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	k, _ := Generate()
	p := filepath.Join(dir, "cluster.key")
	if err := Save(p, k); err != nil {
		t.Fatal(err)
	}
	if err := Save(p, k); err == nil {
		t.Fatal("Save overwrote an existing key file")
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v", st.Mode().Perm())
	}
	got, err := Load(p)
	if err != nil || got != k {
		t.Fatalf("Load = %v, %v", got.ID(), err)
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("world-readable key file: %v", err)
	}
	// Group-readable is refused too (issue 26): whoever reads the key is a
	// member of the cluster.
	if err := os.Chmod(p, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("group-readable key file: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("missing file loaded")
	}
}
