package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/boltcheck"
	"github.com/linkraft/linkraft/internal/status"
	"github.com/linkraft/linkraft/link"
)

// TestStorageAlarmCountsLiveBytes: the alarm counts what a bbolt file
// holds (its high-water mark, less the free pages the node reports), not
// its size, and not the raw visit file: a state file that held 20 MiB and
// was emptied, a grown-ahead file and a big visits.db leave a small
// quota unpassed.
func TestStorageAlarmCountsLiveBytes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "shard-0", "state.db")
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	val := make([]byte, 1000)
	for i := range 20 {
		err := db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			for j := range 1000 {
				if err == nil {
					err = b.Put(fmt.Appendf(nil, "%04d-%04d", i, j), val)
				}
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte("b")) }); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	hwm, err := boltcheck.HighWater(path)
	if err != nil || hwm <= 0 || hwm > fi.Size() || fi.Size() < 20<<20 {
		t.Fatalf("high-water mark %d, %v; file %d", hwm, err, fi.Size())
	}
	if _, err := boltcheck.HighWater(filepath.Join(dir, "nothing.db")); err == nil {
		t.Fatal("a missing file has a high-water mark")
	}
	if err := os.WriteFile(filepath.Join(dir, visitFile), make([]byte, 8<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	a := storageAlarm{cfg: Config{DataDir: dir, QuotaBytes: 4 << 20, MinFreeBytes: -1},
		freePages: func() map[string]int64 { return map[string]int64{path: int64(db.Stats().FreeAlloc)} }}
	st := a.measure()
	if st.Alarm || st.UsedBytes > 1<<20 {
		t.Fatalf("emptied state file and an 8 MiB visit file against a 4 MiB quota: %+v", st)
	}
	a.freePages = nil
	if st := a.measure(); !st.Alarm || st.UsedBytes < 20<<20 {
		t.Fatalf("without the free pages: %+v", st)
	}
}

// TestStorageAlarmChecksAtWriteTime: between two measurements the
// commands let through count, so a burst is refused before the next poll
// would see it; the next measurement starts the count again.
func TestStorageAlarmChecksAtWriteTime(t *testing.T) {
	t.Parallel()
	a := storageAlarm{cfg: Config{DataDir: t.TempDir()}}
	a.last.Store(&status.Storage{UsedBytes: 1 << 20, QuotaBytes: 2 << 20, FreeBytes: -1, CheckedAt: time.Now()})
	create := append([]byte{byte(command.TypeCreateIfAbsent)}, make([]byte, 16<<10)...) // 64 KiB with amplification
	group := command.ShardID(0).Group()
	let := 0
	for ; let < 100; let++ {
		if err := a.refusal(&Node{}, group, create); err != nil {
			if !errors.Is(err, link.ErrInsufficientStorage) {
				t.Fatal(err)
			}
			break
		}
	}
	if let != 15 { // 1 MiB of room, 64 KiB each: the 16th reaches the quota
		t.Fatalf("%d creates let through before a refusal; want 15", let)
	}
	del := []byte{byte(command.TypeDelete)}
	if err := a.refusal(&Node{}, group, del); err != nil {
		t.Fatalf("a delete under the write-time check: %v", err)
	}
	a.written.Store(0) // as measure does
	if err := a.refusal(&Node{}, group, create); err != nil {
		t.Fatalf("after a new measurement: %v", err)
	}
}
