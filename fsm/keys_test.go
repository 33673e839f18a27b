package fsm

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/apikey"
)

func TestMetaKeysAndBlocklist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.db")
	m, err := NewMetaFSM(MetaConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { m.Close() }()
	v0 := m.KeysVersion()
	first := apikey.Key{ID: "a1", Name: "first", Owner: "admin", Scopes: apikey.Admin, CreatedAt: t0, Hash: apikey.HashOf("secret-one")}
	if r := applyAt(t, m, 1, (&command.CreateKey{Key: first, First: true}).Encode()).(*command.KeyResult); r.Err != nil {
		t.Fatal(r.Err)
	}
	if m.KeysVersion() == v0 {
		t.Fatal("KeysVersion did not move after a key was made")
	}
	// The first key is made once: a second leader's attempt is refused.
	again := first
	again.ID, again.Hash = "a2", apikey.HashOf("secret-two")
	if r := applyAt(t, m, 2, (&command.CreateKey{Key: again, First: true}).Encode()).(*command.KeyResult); !errors.Is(r.Err, command.ErrFirstKeyMade) {
		t.Fatalf("second first key: %v", r.Err)
	}
	// A duplicate ID or secret is refused.
	dupID := apikey.Key{ID: "a1", Name: "x", Owner: "bob", Scopes: apikey.LinksRead, CreatedAt: t0, Hash: apikey.HashOf("other")}
	dupHash := apikey.Key{ID: "b1", Name: "x", Owner: "bob", Scopes: apikey.LinksRead, CreatedAt: t0, Hash: first.Hash}
	for i, k := range []apikey.Key{dupID, dupHash} {
		if r := applyAt(t, m, uint64(3+i), (&command.CreateKey{Key: k}).Encode()).(*command.KeyResult); !errors.Is(r.Err, command.ErrKeyExists) {
			t.Fatalf("duplicate %d: %v", i, r.Err)
		}
	}
	bob := apikey.Key{ID: "b2", Name: "ci", Owner: "bob", Scopes: apikey.LinksRead | apikey.LinksWrite, RateLimit: 7, CreatedAt: t0, Hash: apikey.HashOf("bob-secret")}
	if r := applyAt(t, m, 5, (&command.CreateKey{Key: bob}).Encode()).(*command.KeyResult); r.Err != nil {
		t.Fatal(r.Err)
	}
	keys, err := m.Keys()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]apikey.Key{first, bob}, keys); d != "" {
		t.Fatal(d)
	}
	v1 := m.KeysVersion()
	if r := applyAt(t, m, 6, (&command.RevokeKey{ID: "a1", At: t0}).Encode()).(*command.KeyResult); r.Err != nil || r.Key.ID != "a1" {
		t.Fatalf("revoke: %+v", r)
	}
	if r := applyAt(t, m, 7, (&command.RevokeKey{ID: "a1", At: t0}).Encode()).(*command.KeyResult); !errors.Is(r.Err, command.ErrKeyNotFound) {
		t.Fatalf("second revoke: %v", r.Err)
	}
	if m.KeysVersion() == v1 {
		t.Fatal("KeysVersion did not move after a revocation")
	}
	// Revoking every key does not let a first key be made again.
	if made, _ := m.FirstKeyMade(); !made {
		t.Fatal("FirstKeyMade false")
	}
	applyAt(t, m, 8, (&command.SetBlocked{Domain: "evil.example", Blocked: true, At: t0}).Encode())
	applyAt(t, m, 9, (&command.SetBlocked{Domain: "bad.example", Blocked: true, At: t0}).Encode())
	applyAt(t, m, 10, (&command.SetBlocked{Domain: "bad.example", At: t0}).Encode())
	bl, err := m.BlockedDomains()
	if err != nil || len(bl) != 1 || !bl["evil.example"].Equal(t0) {
		t.Fatalf("blocklist %v, %v", bl, err)
	}
	// Bad entries are rejected, not applied.
	for i, cmd := range [][]byte{
		(&command.CreateKey{Key: apikey.Key{ID: "", Owner: "x", Scopes: 1, Hash: apikey.HashOf("z")}}).Encode(),
		(&command.CreateKey{Key: apikey.Key{ID: "c1", Owner: "x", Scopes: 0, Hash: apikey.HashOf("z")}}).Encode(),
		(&command.CreateKey{Key: apikey.Key{ID: "c1", Owner: "x", Scopes: 1}}).Encode(),
		(&command.RevokeKey{ID: "NOT VALID"}).Encode(),
		(&command.SetBlocked{Domain: "Evil.Example", Blocked: true}).Encode(),
		(&command.SetBlocked{Domain: "", Blocked: true}).Encode(),
	} {
		if _, ok := applyAt(t, m, uint64(11+i), cmd).(*command.Rejection); !ok {
			t.Errorf("bad entry %d was not rejected", i)
		}
	}
	// Everything survives a reopen.
	m.Close()
	if m, err = NewMetaFSM(MetaConfig{Path: path}); err != nil {
		t.Fatal(err)
	}
	if keys, _ := m.Keys(); len(keys) != 1 || keys[0].ID != "b2" || keys[0].RateLimit != 7 {
		t.Fatalf("after reopen: %+v", keys)
	}
	if !command.IsFirstKey((&command.CreateKey{Key: first, First: true}).Encode()) || command.IsFirstKey((&command.CreateKey{Key: bob}).Encode()) {
		t.Fatal("IsFirstKey")
	}
}
