package boltcheck

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// build writes a bbolt file as linkraft's stores do (no stored freelist):
// nested buckets, small inline buckets, values spanning overflow pages,
// and space freed by deletes.
func build(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		err := db.Update(func(tx *bolt.Tx) error {
			parent, err := tx.CreateBucketIfNotExists([]byte("hours"))
			if err != nil {
				return err
			}
			b, err := parent.CreateBucketIfNotExists(fmt.Appendf(nil, "h%02d", i))
			if err != nil {
				return err
			}
			for j := range 300 {
				if err := b.Put(fmt.Appendf(nil, "%04d", j), make([]byte, 120)); err != nil {
					return err
				}
			}
			small, err := tx.CreateBucketIfNotExists(fmt.Appendf(nil, "inline-%d", i))
			if err == nil {
				err = small.Put([]byte("k"), []byte("v"))
			}
			if err == nil {
				err = b.Put([]byte("big"), make([]byte, 3*4096+100))
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("hours")).DeleteBucket([]byte("h03")) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCheck: a sound file passes (as do a missing and an empty one); a
// page overwritten, a file cut short, meta pages both torn and a file of
// another kind are found, where bbolt's Open would panic on a goroutine of
// its own or misread.
func TestCheck(t *testing.T) {
	t.Parallel()
	path := build(t)
	if err := Check(path); err != nil {
		t.Fatalf("a sound file: %v", err)
	}
	if err := Check(filepath.Join(t.TempDir(), "none.db")); err != nil {
		t.Fatalf("a missing file: %v", err)
	}
	empty := filepath.Join(t.TempDir(), "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Check(empty); err != nil {
		t.Fatalf("an empty file: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	damage := func(name string, change func(b []byte) []byte) {
		t.Helper()
		p := filepath.Join(t.TempDir(), name+".db")
		if err := os.WriteFile(p, change(append([]byte(nil), orig...)), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := Check(p); !errors.Is(err, ErrDamaged) {
			t.Errorf("%s: %v, want ErrDamaged", name, err)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	junk := func(b []byte) {
		for i := range b {
			b[i] = 0xAB
		}
	}
	damage("pages overwritten", func(b []byte) []byte {
		for off := 4 * 4096; off+4096 < len(b); off += 5 * 4096 {
			junk(b[off : off+4096])
		}
		return b
	})
	damage("one page header", func(b []byte) []byte {
		// every page past the metas and the freelist: one of them is in use
		for off := 3 * 4096; off+16 < len(b); off += 4096 {
			b[off+8] = 0x10 // flags no page has
		}
		return b
	})
	damage("cut short", func(b []byte) []byte { return b[:fi.Size()/3] })
	damage("metas torn", func(b []byte) []byte { junk(b[:2*4096]); return b })
	damage("another file", func(b []byte) []byte { junk(b); return b })
}

// BenchmarkCheck: what Check adds to opening a file of about 100 MiB of
// links (go test ./internal/boltcheck -run '^$' -bench Check).
func BenchmarkCheck(b *testing.B) {
	path := filepath.Join(b.TempDir(), "big.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: true, FreelistType: bolt.FreelistMapType, NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	val := make([]byte, 300)
	for i := range 100 {
		err := db.Update(func(tx *bolt.Tx) error {
			bk, err := tx.CreateBucketIfNotExists([]byte("links"))
			for j := range 2500 {
				if err == nil {
					err = bk.Put(fmt.Appendf(nil, "%08d", j*100+i), val)
				}
			}
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	db.Close()
	fi, _ := os.Stat(path)
	b.SetBytes(fi.Size())
	b.ResetTimer()
	for b.Loop() {
		if err := Check(path); err != nil {
			b.Fatal(err)
		}
	}
}
