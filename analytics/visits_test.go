package analytics

import (
	"encoding/binary"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

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
	s, err := OpenVisitStore(path)
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
	s, err := OpenVisitStore(filepath.Join(t.TempDir(), "visits.db"))
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
