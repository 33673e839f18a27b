package fsm

import (
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/link"
)

// Two replicas that apply the same entries have the same digest at the same
// applied index; one that differs in a single link field does not.
func TestShardDigestComparesReplicas(t *testing.T) {
	a, b := mustShard(t, ShardConfig{}), mustShard(t, ShardConfig{})
	entries := [][]byte{
		(&command.CreateIfAbsent{Code: "abc", Now: t0, Nonce: 1, Request: link.CreateRequest{URL: "https://example.com/a"}}).Encode(),
		(&command.CreateIfAbsent{Code: "abd", Now: t0, Nonce: 2, Request: link.CreateRequest{URL: "https://example.com/b"}}).Encode(),
		(&command.Update{Code: "abc", Now: t0, Patch: link.Patch{URL: new("https://example.com/a2")}}).Encode(),
		(&command.Delete{Code: "abd", Now: t0}).Encode(),
	}
	for i, e := range entries {
		applyAt(t, a, uint64(i+1), e)
		applyAt(t, b, uint64(i+1), e)
	}
	da, err := a.Digest()
	if err != nil {
		t.Fatal(err)
	}
	db, _ := b.Digest()
	if da != db || da.AppliedIndex != 4 || da.Items != 2 || len(da.Sum) != 64 {
		t.Fatalf("replicas with the same entries: %+v vs %+v", da, db)
	}
	// The same index, a tombstone lost on one replica (as a bug could).
	b.mu.RLock()
	err = b.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketLinks).Delete([]byte("abd")) })
	b.mu.RUnlock()
	if err != nil {
		t.Fatal(err)
	}
	if db, _ = b.Digest(); db.Sum == da.Sum || db.AppliedIndex != da.AppliedIndex || db.Items != 1 {
		t.Fatalf("a lost tombstone does not change the digest: %+v vs %+v", da, db)
	}
	// An update applied on one side only changes it too.
	applyAt(t, a, 5, (&command.Update{Code: "abc", Now: t0, Patch: link.Patch{URL: new("https://example.com/a3")}}).Encode())
	if d2, _ := a.Digest(); d2.Sum == da.Sum || d2.AppliedIndex != 5 {
		t.Fatalf("digest after an update: %+v (was %+v)", d2, da)
	}
}

// Every grant is kept under its Raft index, so the history shows a start
// granted twice, which a record keyed by start would overwrite; records of
// the older form (keyed by start) are still listed.
func TestLeaseHistoryKeepsEveryGrant(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.db")
	m, err := NewMetaFSM(MetaConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// An older file's record: [0, 10) to n0, kept by start.
	m.mu.RLock()
	err = m.db.Update(func(tx *bolt.Tx) error {
		v := binary.BigEndian.AppendUint64(nil, 10)
		return tx.Bucket(bucketLeases).Put(binary.BigEndian.AppendUint64(nil, 0), append(v, "n0"...))
	})
	m.mu.RUnlock()
	if err != nil {
		t.Fatal(err)
	}
	applyAt(t, m, 7, (&command.LeaseRange{Node: "n1", N: 100}).Encode())
	applyAt(t, m, 9, (&command.LeaseRange{Node: "n2", N: 50}).Encode())
	got, err := m.Leases()
	if err != nil {
		t.Fatal(err)
	}
	want := []Lease{{Start: 0, End: 10, Node: "n0"}, {Index: 7, Start: 0, End: 100, Node: "n1"}, {Index: 9, Start: 100, End: 150, Node: "n2"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("lease history (-want +got):\n%s", d)
	}
	d1, err := m.Digest()
	if err != nil || d1.Items != 3 || d1.AppliedIndex != 9 {
		t.Fatalf("meta digest %+v, %v", d1, err)
	}
	applyAt(t, m, 10, (&command.LeaseRange{Node: "n1", N: 1}).Encode())
	if d2, _ := m.Digest(); d2.Sum == d1.Sum || d2.Items != 4 {
		t.Fatalf("a new grant does not change the meta digest: %+v", d2)
	}
}
