package lazyfs

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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

// closeAtEnd closes f when the test ends, before the unmount: a
// test that fails with a file of its own mount open would hang at exit,
// its flush waiting on the file system it serves itself.
func closeAtEnd(t *testing.T, f *os.File) {
	t.Cleanup(func() { _ = f.Close() })
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
	closeAtEnd(t, f)
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
	closeAtEnd(t, f)
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
// there and one committed with NoSync (a missing fsync) is gone. bbolt runs
// in a child process, as linknode does under the harness: a page fault on
// an mmap of a FUSE file is served by the file system's process, and a Go
// process that faults on its own mount can stop the world on itself (the
// garbage collector waits for the faulting thread, which waits for a
// server goroutine that cannot run).
func TestBoltOnLazyFS(t *testing.T) {
	if path := os.Getenv("LAZYFS_TEST_BOLT"); path != "" {
		boltChild(t, path, os.Getenv("LAZYFS_TEST_STEP"))
		return
	}
	l := mount(t)
	path := filepath.Join(l.dir, "state.db")
	child := func(step string) string {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^TestBoltOnLazyFS$", "-test.v")
		cmd.Env = append(os.Environ(), "LAZYFS_TEST_BOLT="+path, "LAZYFS_TEST_STEP="+step)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child %s: %v\n%s", step, err, out)
		}
		return string(out)
	}
	out := child("write")
	if !strings.Contains(out, "keys=3000") {
		t.Fatalf("before the power cut:\n%s", out)
	}
	lost, err := l.PowerLoss()
	if err != nil {
		t.Fatal(err)
	}
	if lost.Bytes == 0 {
		t.Fatal("nothing was lost")
	}
	if out := child("read"); !strings.Contains(out, "keys=2000") {
		t.Fatalf("after the power cut (lost %+v), want the 2000 synced keys:\n%s", lost, out)
	}
}

// boltChild is TestBoltOnLazyFS's child: step write commits 2,000 keys
// with fsync and 1,000 more without, then exits without a sync; step read
// checks the file and counts the keys.
func boltChild(t *testing.T, path, step string) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	count := func() int {
		n := 0
		_ = db.View(func(tx *bolt.Tx) error {
			if b := tx.Bucket([]byte("b")); b != nil {
				n = b.Stats().KeyN
			}
			return nil
		})
		return n
	}
	if step == "read" {
		if err := db.View(func(tx *bolt.Tx) error {
			for err := range tx.Check() {
				return err
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("keys=%d\n", count())
		return
	}
	put := func(from, to int) {
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
	fmt.Printf("keys=%d\n", count())
	// The process ends without closing (a kill): nothing more is synced.
	os.Exit(0)
}

// TestCacheKeptUnderStatAndOpen: a page written through the mmap's file
// keeps what was written while other calls stat and open the file. With
// the kernel allowed to drop a file's cached pages when its attributes
// change (FUSE's auto_inval_data) or when it is opened, a page fault
// while a write of that page was in flight here was answered with the
// page as it was before the write, and the page stayed so: bbolt began
// commits from older meta pages (nodes panicked with "page N already
// freed" and lost commits without a power cut). Every write is held back
// 300 ms here to keep it in flight; the child, which maps the file as
// bbolt does, fails if the page is stale.
func TestCacheKeptUnderStatAndOpen(t *testing.T) {
	if path := os.Getenv("LAZYFS_TEST_COHERENT"); path != "" {
		coherentChild(t, path)
		return
	}
	l := mount(t)
	l.writeDelay.Store(int64(300 * time.Millisecond))
	cmd := exec.Command(os.Args[0], "-test.run=^TestCacheKeptUnderStatAndOpen$", "-test.v")
	cmd.Env = append(os.Environ(), "LAZYFS_TEST_COHERENT="+filepath.Join(l.dir, "f"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "page=B") {
		t.Fatalf("child:\n%s", out)
	}
}

// coherentChild is TestCacheKeptUnderStatAndOpen's child.
func coherentChild(t *testing.T, path string) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	page := func(c byte) []byte { return bytes.Repeat([]byte{c}, pageSize) }
	if _, err := f.WriteAt(append(page('A'), page('a')...), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, 2*pageSize, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(m)
	if m[0] != 'A' {
		t.Fatalf("mapped page 0 starts %q", m[0])
	}
	// An fsync moves the backing file's mtime: the next stat sees it.
	if _, err := f.WriteAt(page('x'), pageSize); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := f.WriteAt(page('B'), 0)
		done <- err
	}()
	// The kernel puts the write in its cached page, then sends it: once
	// the mapping shows it, the write is in flight (held back 300 ms).
	for deadline := time.Now().Add(5 * time.Second); m[0] != 'B'; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the write never reached the mapping")
		}
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	if g, err := os.Open(path); err == nil {
		g.Close()
	}
	during := m[0] // a fault now, if the page was dropped
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	if _, err := f.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	if during != 'B' || m[0] != 'B' || buf[0] != 'B' {
		t.Fatalf("page 0 read %q while its write was in flight, %q through the mapping and %q by pread after it: want B", during, m[0], buf[0])
	}
	fmt.Println("page=B")
}

// TestUnlinkedFileIsForgotten: a file written, unlinked while open and
// then closed leaves no state behind (its pages would otherwise be held,
// and counted as lost at the next power cut, for good); while it is open
// it still reads what was written, before the unlink and after.
func TestUnlinkedFileIsForgotten(t *testing.T) {
	l := mount(t)
	path := filepath.Join(l.dir, "tmp")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, f)
	// Written before and after the unlink: a descriptor still open reads
	// all of it.
	if _, err := f.Write(bytes.Repeat([]byte("b"), 3*pageSize)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(bytes.Repeat([]byte("u"), 3*pageSize)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		off  int64
		want byte
	}{{0, 'b'}, {2 * pageSize, 'b'}, {3 * pageSize, 'u'}, {6*pageSize - 1, 'u'}} {
		buf := make([]byte, 1)
		if _, err := f.ReadAt(buf, c.off); err != nil || buf[0] != c.want {
			t.Fatalf("read %q, %v at %d of the unlinked file, want %q", buf, err, c.off, c.want)
		}
	}
	if p := l.Pending(); p.Files != 1 {
		t.Fatalf("pending %+v while the unlinked file is open", p)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// The kernel's release reaches the file system after close returns.
	for deadline := time.Now().Add(5 * time.Second); l.Pending().Files != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("pending %+v after the last close of an unlinked file", l.Pending())
		}
	}
}
