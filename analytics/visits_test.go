package analytics

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/internal/boltcheck"
	"github.com/linkraft/linkraft/internal/testkit"
	"github.com/linkraft/linkraft/link"
)

// TestVisitStoreMigratesTheOldLayout: a file written before hour buckets
// (JSON records in a by-time bucket, a by-code index) opens with every
// visit readable, and the old buckets gone.
func TestVisitStoreMigratesTheOldLayout(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "visits.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 1, 10, 30, 0, 0, time.UTC)
	var want []link.Visit
	err = db.Update(func(tx *bolt.Tx) error {
		tb, _ := tx.CreateBucket(bucketByTime)
		cb, _ := tx.CreateBucket(bucketByCode)
		for i := range 25000 { // more than one migration transaction
			v := link.Visit{Code: "abc", Time: t0.Add(time.Duration(i) * time.Second), Node: "n1", Network: "192.0.2.0/24", UserAgent: "ua"}
			val, _ := json.Marshal(v)
			tk := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, uint64(v.Time.UnixNano())), uint32(i))
			if err := tb.Put(tk, val); err != nil {
				return err
			}
			if err := cb.Put(append([]byte("abc\x00"), tk...), nil); err != nil {
				return err
			}
			want = append(want, v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	slices.Reverse(want) // List is newest first
	s, err := OpenVisitStore(path, VisitLimits{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.List("abc", t0, t0.Add(24*time.Hour), 100000)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("migrated visits differ (-want +got):\n%s", d)
	}
	_ = s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketByTime) != nil || tx.Bucket(bucketByCode) != nil {
			t.Error("the old buckets are still there")
		}
		return nil
	})
}

// TestVisitStorePurgesWholeHours: the purge drops the hours that ended
// before the cut and keeps the hour the cut falls in.
func TestVisitStorePurgesWholeHours(t *testing.T) {
	t.Parallel()
	s, err := OpenVisitStore(filepath.Join(t.TempDir(), "visits.db"), VisitLimits{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	vs := []link.Visit{{Code: "a", Time: h.Add(-time.Minute)}, {Code: "a", Time: h}, {Code: "b", Time: h.Add(59 * time.Minute)}, {Code: "a", Time: h.Add(time.Hour)}}
	if err := s.Add(vs); err != nil {
		t.Fatal(err)
	}
	n, err := s.Purge(h.Add(30 * time.Minute))
	if err != nil || n != 1 {
		t.Fatalf("purged %d, %v; want the one visit of the hour before", n, err)
	}
	got, _ := s.List("a", h.Add(-time.Hour), h.Add(2*time.Hour), 10)
	if len(got) != 2 || !got[1].Time.Equal(h) {
		t.Fatalf("after purge: %+v", got)
	}
	if n, _ := s.Purge(h.Add(2 * time.Hour)); n != 3 {
		t.Fatalf("second purge took %d, want 3", n)
	}
}

// TestVisitBudgetSheds: past its byte budget a visit file stores no more
// raw visits (each shed one is counted and AddBatch says so) and its live
// bytes stay near the budget; once the purge drops the old hours, the
// space is room again though the file did not shrink. A file system at
// its floor sheds every visit.
func TestVisitBudgetSheds(t *testing.T) {
	t.Parallel()
	const budget = 512 << 10
	path := filepath.Join(t.TempDir(), "visits.db")
	s, err := OpenVisitStore(path, VisitLimits{MaxBytes: budget})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	batch := func(n, from int) *VisitBatch {
		var b VisitBatch
		for i := range n {
			b.Append(&link.Visit{Code: fmt.Sprintf("c%d", (from+i)%97), Time: t0.Add(time.Duration(from+i) * time.Millisecond),
				UserAgent: "Mozilla/5.0 (X11; Linux x86_64) Firefox/130.0", Referer: "https://news.example/item?id=12345", Network: "192.0.2.0/24"})
		}
		return &b
	}
	stored, shedTotal := 0, 0
	for i := range 40 {
		shed, err := s.AddBatch(batch(1000, i*1000))
		if shed > 0 != errors.Is(err, ErrVisitsShed) || (err != nil && !errors.Is(err, ErrVisitsShed)) {
			t.Fatalf("batch %d: shed %d, err %v", i, shed, err)
		}
		stored += 1000 - shed
		shedTotal += shed
	}
	if shedTotal == 0 || s.Shed() != uint64(shedTotal) || stored == 0 {
		t.Fatalf("stored %d, shed %d (store says %d): 40,000 visits of about 150 bytes in a %d-byte budget", stored, shedTotal, s.Shed(), budget)
	}
	if used := s.UsedBytes(); used > budget {
		t.Fatalf("live bytes %d over the budget %d", used, budget)
	}
	if got, _ := s.List("c1", t0, t0.Add(time.Hour), 1_000_000); len(got) == 0 {
		t.Fatal("no visit of c1 kept")
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.Purge(t0.Add(2 * time.Hour)); err != nil || n != stored {
		t.Fatalf("purge: %d, %v; want %d", n, err, stored)
	}
	if used := s.UsedBytes(); used >= fi.Size()/2 {
		t.Fatalf("live bytes %d after the purge, file %d: free pages counted", used, fi.Size())
	}
	if shed, err := s.AddBatch(batch(1000, 0)); shed != 0 || err != nil {
		t.Fatalf("after the purge: shed %d, %v", shed, err)
	}

	floor, err := OpenVisitStore(filepath.Join(t.TempDir(), "visits.db"), VisitLimits{MinFree: 64 << 20,
		FreeSpace: func(string) (int64, error) { return 64<<20 + 100, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer floor.Close()
	if shed, err := floor.AddBatch(batch(100, 0)); shed != 100 || !errors.Is(err, ErrVisitsShed) {
		t.Fatalf("at the floor: shed %d, %v", shed, err)
	}
}

// TestDamagedVisitFileIsNamed: a damaged visit file is refused at open
// with its path and the way out, not a panic of bbolt's.
func TestDamagedVisitFileIsNamed(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "visits.db")
	s, err := OpenVisitStore(path, VisitLimits{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	var vs []link.Visit
	for i := range 5000 {
		vs = append(vs, link.Visit{Code: fmt.Sprintf("c%d", i%50), Time: t0.Add(time.Duration(i) * time.Second), UserAgent: "Mozilla/5.0 Firefox/130.0"})
	}
	if err := s.Add(vs); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := testkit.DamageBoltPages(path); err != nil {
		t.Fatal(err)
	}
	_, err = OpenVisitStore(path, VisitLimits{})
	if !errors.Is(err, boltcheck.ErrDamaged) || !strings.Contains(err.Error(), "mv "+path) {
		t.Fatalf("open of a damaged visit file: %v", err)
	}
}
