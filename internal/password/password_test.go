package password

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestHashVerify(t *testing.T) {
	t.Parallel()
	h := New(Config{})
	ctx := context.Background()
	phc, err := h.Hash(ctx, "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(phc, "$argon2id$v=19$m=19456,t=2,p=1$") || strings.Contains(phc, "correct horse") {
		t.Fatalf("hash %q", phc)
	}
	if err := Check(phc); err != nil {
		t.Fatalf("Check(own hash) = %v", err)
	}
	for pw, want := range map[string]bool{"correct horse": true, "correct hors": false, "": false, "Correct horse": false} {
		ok, err := h.Verify(ctx, phc, pw)
		if err != nil || ok != want {
			t.Errorf("Verify(%q) = %v, %v; want %v", pw, ok, err, want)
		}
	}
	again, err := h.Hash(ctx, "correct horse")
	if err != nil || again == phc {
		t.Fatalf("a second hash of the same password must take a fresh salt: %q, %v", again, err)
	}
}

func TestCheckRefusesWhatIsNoBoundedHash(t *testing.T) {
	t.Parallel()
	good := "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$" + strings.Repeat("A", 43)
	if err := Check(good); err != nil {
		t.Fatalf("Check(%q) = %v", good, err)
	}
	for _, bad := range []string{
		"", "hunter2", "$argon2i$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$" + strings.Repeat("A", 43),
		"$argon2id$v=16$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$" + strings.Repeat("A", 43),
		"$argon2id$v=19$m=4194304,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$" + strings.Repeat("A", 43), // 4 GiB: a denial of service
		"$argon2id$v=19$m=19456,t=1000,p=1$c29tZXNhbHRzb21lc2FsdA$" + strings.Repeat("A", 43),
		"$argon2id$v=19$m=19456,t=2,p=200$c29tZXNhbHRzb21lc2FsdA$" + strings.Repeat("A", 43),
		"$argon2id$v=19$t=2,m=19456,p=1$c29tZXNhbHRzb21lc2FsdA$" + strings.Repeat("A", 43),
		"$argon2id$v=19$m=19456,t=2$c29tZXNhbHRzb21lc2FsdA$" + strings.Repeat("A", 43),
		"$argon2id$v=19$m=19456,t=2,p=1,x=1$c29tZXNhbHRzb21lc2FsdA$" + strings.Repeat("A", 43),
		"$argon2id$v=19$m=19456,t=2,p=1$!!$" + strings.Repeat("A", 43),
		"$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$AAAA",
		"$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$" + strings.Repeat("A", 43) + "$x",
		good + strings.Repeat("A", 200),
	} {
		if err := Check(bad); !errors.Is(err, ErrBadHash) {
			t.Errorf("Check(%q) = %v, want ErrBadHash", bad, err)
		}
	}
}

func TestSlotsBoundConcurrentHashes(t *testing.T) {
	t.Parallel()
	h := New(Config{Slots: 1})
	h.slots <- struct{}{} // the one slot is taken
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := h.Hash(ctx, "x"); !errors.Is(err, ErrBusy) {
		t.Fatalf("Hash with no free slot = %v, want ErrBusy", err)
	}
	phc := "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$" + strings.Repeat("A", 43)
	if _, err := h.Verify(ctx, phc, "x"); !errors.Is(err, ErrBusy) {
		t.Fatalf("Verify with no free slot = %v, want ErrBusy", err)
	}
	<-h.slots
	if ok, err := h.Verify(context.Background(), phc, "x"); err != nil || ok {
		t.Fatalf("Verify after the slot freed = %v, %v", ok, err)
	}
}

// BenchmarkVerify is one guess's cost at the default parameters (what a
// node pays per password check, and per password set).
func BenchmarkVerify(b *testing.B) {
	h := New(Config{})
	phc, err := h.Hash(context.Background(), "correct horse")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.Verify(context.Background(), phc, "wrong horse"); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzCheck: Check and Verify never panic, and what Check accepts Verify
// takes within the bounds.
func FuzzCheck(f *testing.F) {
	f.Add("$argon2id$v=19$m=8,t=1,p=1$c29tZXNhbHRzb21lc2FsdA$" + strings.Repeat("A", 43))
	f.Add("$argon2id$v=19$m=19456,t=2,p=1$$")
	f.Add("$$$$$$")
	f.Fuzz(func(t *testing.T, phc string) {
		if Check(phc) != nil {
			return
		}
		d, err := parse(phc)
		if err != nil || d.p.Memory > maxMemory || d.p.Time > maxTime || d.p.Threads > maxThreads {
			t.Fatalf("Check accepted %q: %+v %v", phc, d.p, err)
		}
	})
}
