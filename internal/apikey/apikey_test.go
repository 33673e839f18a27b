package apikey

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestScopes(t *testing.T) {
	t.Parallel()
	s, err := ParseScopes([]string{"stats:read", "links:read"})
	if err != nil || s != LinksRead|StatsRead || s.String() != "links:read,stats:read" {
		t.Fatalf("ParseScopes = %v (%s), %v", s, s, err)
	}
	if !s.Has(LinksRead) || s.Has(LinksWrite) || s.Has(Admin) || !Admin.Has(LinksWrite) || !Admin.Has(StatsRead) {
		t.Fatal("Has")
	}
	for _, bad := range [][]string{nil, {}, {"links:delete"}, {"admin", "admin"}, {"Admin"}, {""}} {
		if _, err := ParseScopes(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseScopes(%q) = %v", bad, err)
		}
	}
}

func TestNamesSecretsAndHeaders(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"ci", "team-a", "a.b_c@d:e", strings.Repeat("x", 64)} {
		if err := ValidName("owner", ok); err != nil {
			t.Errorf("ValidName(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a b", "é", "a/b", "a\nb", strings.Repeat("x", 65)} {
		if err := ValidName("owner", bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidName(%q) = %v", bad, err)
		}
	}
	a, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewSecret()
	if a == b || !strings.HasPrefix(a, "lrk_") || len(a) != 47 || ValidSecret(a) != nil || HashOf(a).Equal(HashOf(b)) || !HashOf(a).Equal(HashOf(a)) {
		t.Fatalf("secrets %q %q", a, b)
	}
	for _, bad := range []string{"short", strings.Repeat("x", 257), strings.Repeat("x", 31) + " ", strings.Repeat("x", 40) + "\n"} {
		if ValidSecret(bad) == nil {
			t.Errorf("ValidSecret(%q) accepted", bad)
		}
	}
	for h, want := range map[string]string{"Bearer abc": "abc", "bearer  abc ": "abc", "Basic abc": "", "Bearer ": "", "Bearerabc": "", "": ""} {
		if got, ok := FromHeader(h); got != want || ok != (want != "") {
			t.Errorf("FromHeader(%q) = %q, %v", h, got, ok)
		}
	}
	if LinkOwner("") != OwnerAdmin || LinkOwner("bob") != "bob" {
		t.Fatal("LinkOwner")
	}
	id, _ := NewID()
	if !ValidID(id) || ValidID("") || ValidID("A B") || ValidID(strings.Repeat("a", 65)) {
		t.Fatalf("ValidID(%q)", id)
	}
}

func TestSecretFiles(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "admin.key")
	s, _ := NewSecret()
	if err := SaveSecret(p, s); err != nil {
		t.Fatal(err)
	}
	if got, err := LoadSecret(p); err != nil || got != s {
		t.Fatalf("LoadSecret = %q, %v", got, err)
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSecret(p); err == nil {
		t.Fatal("a world-readable key file was accepted")
	}
	if err := os.Chmod(p, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSecret(p); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a group-readable key file: %v", err)
	}
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("too short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSecret(p); err == nil {
		t.Fatal("a malformed key was accepted")
	}
}
