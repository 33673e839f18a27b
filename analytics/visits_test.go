package analytics

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
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

// TestVisitListMatchesAScan: visits stored grouped (one record per code per
// hour per write, split past maxGroupVisits and maxGroupSpan), with writes
// whose times overlap and records of the one-visit-a-record layout beside
// them, are listed exactly as a sort of everything stored would list them:
// for every range and limit, the newest limit visits of the code in range,
// newest first.
func TestVisitListMatchesAScan(t *testing.T) {
	t.Parallel()
	s, err := OpenVisitStore(filepath.Join(t.TempDir(), "visits.db"), VisitLimits{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Date(2026, 11, 1, 10, 50, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(7, 7))
	var all []link.Visit
	for w := range 12 { // writes of 400 visits, 3 codes, times jittered across writes
		var b VisitBatch
		for i := range 400 {
			at := t0.Add(time.Duration(w)*90*time.Second + time.Duration(rng.IntN(150_000))*time.Millisecond)
			v := link.Visit{Code: []string{"a", "b", "abc"}[rng.IntN(3)], Time: at, Node: "n1", UserAgent: fmt.Sprintf("ua %d/%d", w, i)}
			b.Append(&v)
			all = append(all, v)
		}
		if _, err := s.AddBatch(&b); err != nil {
			t.Fatal(err)
		}
	}
	// The layout before groups: one visit a record, keyed by its own time.
	err = s.db.Update(func(tx *bolt.Tx) error {
		for i := range 50 {
			v := link.Visit{Code: "a", Time: t0.Add(time.Duration(rng.IntN(1500)) * time.Second), Node: "n0", UserAgent: fmt.Sprint("old ", i)}
			bk, err := tx.Bucket(bucketVisits).CreateBucketIfNotExists(hourKey(hourOf(v.Time.UnixNano())))
			if err != nil {
				return err
			}
			if err := bk.Put(visitKey(v.Code, v.Time.UnixNano(), uint32(1<<31+i)), appendVisit(nil, &v)); err != nil {
				return err
			}
			all = append(all, v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	times := func(vs []link.Visit) []int64 {
		out := make([]int64, len(vs))
		for i, v := range vs {
			out[i] = v.Time.UnixNano()
		}
		return out
	}
	for range 300 {
		code := []string{"a", "b", "abc", "ab"}[rng.IntN(4)]
		from := t0.Add(time.Duration(rng.IntN(1400)-60) * time.Second)
		to := from.Add(time.Duration(rng.IntN(1200)) * time.Second)
		limit := []int{1, 3, 10, 100, 10000}[rng.IntN(5)]
		var want []link.Visit
		for _, v := range all {
			if v.Code == code && !v.Time.Before(from) && v.Time.Before(to) {
				want = append(want, v)
			}
		}
		slices.SortStableFunc(want, func(a, b link.Visit) int { return b.Time.Compare(a.Time) })
		want = want[:min(limit, len(want))]
		got, err := s.List(code, from, to, limit)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(times(want), times(got)); d != "" {
			t.Fatalf("List(%q, %v, %v, %d): times differ (-want +got):\n%s", code, from, to, limit, d)
		}
		for _, v := range got {
			if v.Code != code {
				t.Fatalf("a visit of %q listed for %q", v.Code, code)
			}
		}
	}
	n, err := s.Purge(t0.Add(3 * time.Hour))
	if err != nil || n != len(all)-50 { // the old records were put by hand, without the hour's count
		t.Fatalf("purged %d, %v; want %d", n, err, len(all)-50)
	}
}
