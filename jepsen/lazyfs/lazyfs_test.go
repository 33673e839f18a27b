package lazyfs

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// mount mounts a lazyfs for a test (root and /dev/fuse: CI has both).
func mount(t *testing.T) *FS {
	t.Helper()
	if err := Available(); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		t.Fatal("lazyfs needs root to mount (CI runs as root)")
	}
	base := t.TempDir()
	l, err := Mount(filepath.Join(base, "backing"), filepath.Join(base, "mnt"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Unmount(); err != nil {
			t.Error(err)
		}
	})
	return l
}

// TestUnsyncedWritesAreLost: what was written and not fsynced is read
// back until a power cut, and gone after it (the file is back to what its
// last fsync left); what was fsynced stays; a size cut that was not synced
// is undone; the backing file holds only synced data all along.
func TestUnsyncedWritesAreLost(t *testing.T) {
	l := mount(t)
	path := filepath.Join(l.dir, "f")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	synced := bytes.Repeat([]byte("s"), 10000)
	if _, err := f.Write(synced); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	// Unsynced: overwrite the middle, append, and read it all back.
	if _, err := f.WriteAt([]byte("UNSYNCED"), 5000); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte("a"), 5000), 10000); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 15000 || string(got[5000:5008]) != "UNSYNCED" || got[14999] != 'a' {
		t.Fatalf("before the power cut: %d bytes, %q at 5000", len(got), got[5000:5008])
	}
	if b, _ := os.ReadFile(filepath.Join(l.backing, "f")); !bytes.Equal(b, synced) {
		t.Fatalf("the backing file holds %d bytes, not the synced 10000", len(b))
	}
	if p := l.Pending(); p.Files != 1 || p.Bytes == 0 {
		t.Fatalf("pending %+v", p)
	}
	lost, err := l.PowerLoss()
	if err != nil {
		t.Fatal(err)
	}
	if lost.Files != 1 || lost.Bytes < 5000 {
		t.Fatalf("lost %+v", lost)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, synced) {
		t.Fatalf("after the power cut: %d bytes, want the synced 10000", len(got))
	}
	// An unsynced cut is undone too; a synced one stays.
	if err := os.Truncate(path, 100); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Size() != 100 {
		t.Fatalf("size %d after a truncate", st.Size())
	}
	if _, err := l.PowerLoss(); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Size() != 10000 {
		t.Fatalf("size %d after the power cut, want 10000", st.Size())
	}
	f, err = os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(100); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("x"), 200); err != nil { // 100..200 reads as zeros
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := l.PowerLoss(); err != nil {
		t.Fatal(err)
	}
	got, _ = os.ReadFile(path)
	if want := append(append(synced[:100:100], make([]byte, 100)...), 'x'); !bytes.Equal(got, want) {
		t.Fatalf("after a synced cut and write: %d bytes", len(got))
	}
}

// TestBoltOnLazyFS: bbolt (mmap reads, pwrite, fdatasync) works on the
// mount; after a power cut, every transaction committed with fsync is
// there and one committed with NoSync (a missing fsync) is gone.
func TestBoltOnLazyFS(t *testing.T) {
	l := mount(t)
	path := filepath.Join(l.dir, "state.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	put := func(from, to int) {
		t.Helper()
		if err := db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			for i := from; i < to; i++ {
				if err := b.Put(binary.BigEndian.AppendUint32(nil, uint32(i)), bytes.Repeat([]byte{byte(i)}, 300)); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		put(i*100, (i+1)*100)
	}
	db.NoSync = true // the bug: commits that skip fdatasync
	put(2000, 3000)
	count := func() int {
		n := 0
		_ = db.View(func(tx *bolt.Tx) error {
			n = tx.Bucket([]byte("b")).Stats().KeyN
			return nil
		})
		return n
	}
	if n := count(); n != 3000 {
		t.Fatalf("%d keys before the power cut", n)
	}
	// The process dies: its file is closed without a sync.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	lost, err := l.PowerLoss()
	if err != nil {
		t.Fatal(err)
	}
	if lost.Bytes == 0 {
		t.Fatal("nothing was lost")
	}
	db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n := count(); n != 2000 {
		t.Fatalf("%d keys after the power cut, want the 2000 synced ones (%s)", n, fmt.Sprint(lost))
	}
	if err := db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
