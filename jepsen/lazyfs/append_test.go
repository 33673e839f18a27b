package lazyfs

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// TestAppendsReadBackWhole: appends of uneven sizes, each synced, while
// other goroutines read what is already written and stat the file by its
// name (a write-ahead log's pattern, with the storage alarm walking the
// data dir: a record at a time into a page part filled, the records
// before it read back at once), read back whole and the same through the
// mount, and so does the backing file. A lookup that answered the backing
// file's size (behind the writes until a sync) had the kernel cut its
// cached page there and keep zeros over data written before them.
func TestAppendsReadBackWhole(t *testing.T) {
	l := mount(t)
	path := filepath.Join(l.dir, "wal")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, f)
	var want []byte
	var size atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 9))
			buf := make([]byte, 300)
			for {
				select {
				case <-stop:
					return
				default:
				}
				n := size.Load()
				if n == 0 {
					continue
				}
				off := rng.Int64N(n)
				_, _ = f.ReadAt(buf[:min(int64(len(buf)), n-off)], off)
				if r == 0 {
					_, _ = os.Stat(path)
				}
			}
		})
	}
	rng := rand.New(rand.NewPCG(5, 5))
	for i := range 600 {
		rec := bytes.Repeat([]byte{byte(1 + i%250)}, 20+rng.IntN(300))
		if _, err := f.WriteAt(rec, int64(len(want))); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		want = append(want, rec...)
		size.Store(int64(len(want)))
	}
	close(stop)
	wg.Wait()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	backing, err := os.ReadFile(filepath.Join(l.backing, "wal"))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"the mount": got, "the backing file": backing} {
		if !bytes.Equal(b, want) {
			i := 0
			for i < min(len(b), len(want)) && b[i] == want[i] {
				i++
			}
			t.Errorf("%s: %d bytes, want %d; first difference at %d", name, len(b), len(want), i)
		}
	}
}
