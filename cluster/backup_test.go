package cluster_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/internal/backup"
	"github.com/linkraft/linkraft/internal/testcluster"
	"github.com/linkraft/linkraft/internal/testkit"
	"github.com/linkraft/linkraft/link"
)

// TestBackupDuringWritesRestoresIntoANewCluster: a backup taken from a
// follower while clients write holds every link acknowledged before it
// began, with its clicks, tombstones and the cluster's keys and blocklist.
// A damaged or cut file is refused and writes nothing; the whole file goes
// into a new 3-node cluster of another shard count, where every such link
// redirects as before, the deleted code stays gone, the key opens it, and
// no code the old cluster had is handed out again. A restore into a
// cluster that holds links is refused, and the same restore resumed
// finds everything present.
func TestBackupDuringWritesRestoresIntoANewCluster(t *testing.T) {
	t.Parallel()
	src := testcluster.Start(t, testcluster.Options{Size: 3, Shards: 4})
	n := src.Nodes[0]
	// A loaded machine may move the meta leader under a key's commit
	// ("leadership lost while committing log"): ask again.
	var secret string
	testkit.Eventually(t, 30*time.Second, func() error {
		var err error
		secret, _, err = n.Keys().Create(ctx(t), apikey.Request{Name: "ops", Owner: "team", Scopes: apikey.Admin})
		return err
	})
	testkit.Eventually(t, 30*time.Second, func() error { return n.Keys().SetBlocked(ctx(t), "evil.example", true) })
	var before []*link.Link
	for i := range 60 {
		l, err := src.Nodes[i%3].Links().Create(ctx(t), link.CreateRequest{URL: fmt.Sprintf("https://before.example/%d", i), Owner: "team", Tags: []string{"t"}})
		if err != nil {
			t.Fatal(err)
		}
		before = append(before, l)
	}
	gone := before[7]
	if err := n.Links().Delete(ctx(t), gone.Code); err != nil {
		t.Fatal(err)
	}
	clicked := before[11]
	batch := &command.ClickBatch{Node: "test", Seq: 1, Deltas: []command.ClickDelta{{Code: clicked.Code,
		Delta: command.ClickTotals{Humans: command.Counts{Total: 9, Countries: map[string]uint64{"FR": 9}}}}}}
	if _, err := n.RetryUnknown(ctx(t), n.Locate(clicked.Code).Group(), batch.Encode()); err != nil {
		t.Fatal(err)
	}

	srcNext, err := n.Meta().NextID()
	if err != nil {
		t.Fatal(err)
	}
	// Writers run through the backup; the backup is taken on a node that
	// leads at most some shards.
	var (
		stop    atomic.Bool
		wg      sync.WaitGroup
		during  sync.Map
		writers = 2
	)
	var lastErr [2]atomic.Pointer[error] // each writer's last failure, for the wait's report
	for w := range writers {
		wg.Go(func() {
			for i := 0; !stop.Load() && i < 2000; i++ {
				l, err := src.Nodes[w+1].Links().Create(ctx(t), link.CreateRequest{URL: fmt.Sprintf("https://during.example/%d/%d", w, i)})
				if err == nil {
					during.Store(l.Code, acked{url: l.URL, at: time.Now()})
				} else {
					lastErr[w].Store(&err)
				}
			}
		})
	}
	// Should the test end early, the writers stop before the cluster
	// closes under them (cleanups run last-registered first).
	t.Cleanup(func() { stop.Store(true); wg.Wait() })
	// Generous: on a loaded CI machine, 3-node clusters of the other
	// tests beside this one have held its writers back for over 30 s.
	testkit.Eventually(t, 60*time.Second, func() error {
		n := 0
		during.Range(func(any, any) bool { n++; return n < 20 })
		if n >= 20 {
			return nil
		}
		var errs []error
		for w := range lastErr {
			if e := lastErr[w].Load(); e != nil {
				errs = append(errs, fmt.Errorf("writer %d: %w", w, *e))
			}
		}
		return fmt.Errorf("writes under way: %d acknowledged; last failures: %v", n, errors.Join(errs...))
	})
	var file bytes.Buffer
	began := time.Now()
	man, err := src.Nodes[2].Admin().Backup(transfer(t), &file)
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	var records uint64
	for _, s := range man.Shards {
		records += s.Records
	}
	if len(man.Shards) != 4 || records < uint64(len(before)) || man.Keys < 2 || man.Blocked != 1 || man.NextID < srcNext {
		t.Fatalf("manifest: %+v", man)
	}

	dst := testcluster.Start(t, testcluster.Options{Size: 3, Shards: 3})
	d := dst.Nodes[1]
	for _, bad := range [][]byte{file.Bytes()[:file.Len()/2], flip(file.Bytes(), file.Len()/3)} {
		if _, err := d.Admin().Restore(transfer(t), bytes.NewReader(bad), false); !errors.Is(err, backup.ErrTruncated) && !errors.Is(err, backup.ErrDamaged) {
			t.Fatalf("a bad file: %v", err)
		}
	}
	// Whole frames, but a record no create could make after a good one:
	// refused before anything is written.
	var hostile bytes.Buffer
	hw, err := backup.NewWriter(&hostile, backup.Header{ClusterID: "x"})
	if err != nil {
		t.Fatal(err)
	}
	_ = hw.Meta(backup.Meta{})
	_ = hw.BeginShard(0, 1)
	for code, u := range map[string]string{"good-one": "https://e.example/", "bad-one": "javascript:alert(1)"} {
		_ = hw.Record(backup.Record{Code: code, Link: command.EncodeRecord(&link.Link{URL: u, CreatedAt: time.Now(), UpdatedAt: time.Now(), Redirect: 302})})
	}
	if err := hw.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Admin().Restore(transfer(t), bytes.NewReader(hostile.Bytes()), false); !errors.Is(err, backup.ErrDamaged) {
		t.Fatalf("a file with a javascript: link: %v", err)
	}
	// A next free ID no cluster reaches would have the restore lease for
	// hours: refused, in the meta part or the manifest.
	for _, meta := range []bool{true, false} {
		var huge bytes.Buffer
		hw, err := backup.NewWriter(&huge, backup.Header{ClusterID: "x"})
		if err != nil {
			t.Fatal(err)
		}
		if meta {
			_ = hw.Meta(backup.Meta{NextID: 1 << 50})
		} else {
			_ = hw.Meta(backup.Meta{})
			hw.SetNextID(1 << 50)
		}
		if err := hw.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Admin().Restore(transfer(t), bytes.NewReader(huge.Bytes()), false); !errors.Is(err, backup.ErrDamaged) || !strings.Contains(err.Error(), "next free ID") {
			t.Fatalf("a next free ID of 2^50 (in the meta part: %v): %v", meta, err)
		}
	}
	if _, err := d.Links().Get(ctx(t), "good-one", true); !errors.Is(err, link.ErrNotFound) {
		t.Fatalf("a refused file wrote good-one: %v", err)
	}
	if _, err := d.Links().Get(ctx(t), before[0].Code, true); !errors.Is(err, link.ErrNotFound) {
		t.Fatalf("a refused file wrote %s: %v", before[0].Code, err)
	}
	if _, err := d.Keys().Authenticate(secret); err == nil {
		t.Fatal("a refused file wrote a key")
	}

	rep, err := d.Admin().Restore(transfer(t), bytes.NewReader(file.Bytes()), false)
	if err != nil {
		t.Fatal(err)
	}
	if uint64(rep.Links) != records || rep.Present != 0 || rep.ConflictCount != 0 || rep.Keys < 2 || rep.Blocked != 1 {
		t.Fatalf("report: %+v", rep)
	}
	duringBefore := 0
	during.Range(func(k, v any) bool {
		if a := v.(acked); a.at.Before(began) {
			before = append(before, &link.Link{Code: k.(string), URL: a.url})
			duringBefore++
		}
		return true
	})
	t.Logf("%d links of the concurrent writers were acknowledged before the backup began", duringBefore)
	for _, node := range dst.Nodes {
		for _, l := range before {
			var got *link.Link
			var err error
			// A read that finds no leader (elections on a loaded machine)
			// is asked again.
			testkit.Eventually(t, time.Minute, func() error {
				got, err = node.Links().Get(ctx(t), l.Code, true)
				if errors.Is(err, link.ErrUnavailable) {
					return err
				}
				return nil
			})
			if l.Code == gone.Code {
				if !errors.Is(err, link.ErrDeleted) && (err != nil || !got.Deleted) {
					t.Fatalf("%s: the deleted %s: %+v, %v", node.ID(), l.Code, got, err)
				}
				continue
			}
			if err != nil || got.URL != l.URL || (l.Owner != "" && (got.Owner != l.Owner || !got.CreatedAt.Equal(l.CreatedAt))) {
				t.Fatalf("%s: %s: %+v, %v", node.ID(), l.Code, got, err)
			}
		}
	}
	if c, err := d.Analytics().ClickCount(ctx(t), clicked.Code); err != nil || c != 9 {
		t.Fatalf("clicks of %s: %d, %v", clicked.Code, c, err)
	}
	if _, err := d.Links().Create(ctx(t), link.CreateRequest{URL: "https://e.example", Alias: gone.Code}); !errors.Is(err, link.ErrAliasTaken) {
		t.Fatalf("the deleted code as an alias: %v", err)
	}
	if k, err := d.Keys().Authenticate(secret); err != nil || k.Owner != "team" {
		t.Fatalf("the key in the new cluster: %+v, %v", k, err)
	}
	if !d.Keys().Blocked("evil.example") {
		t.Fatal("the blocklist was not restored")
	}
	old := map[string]bool{}
	for _, l := range before {
		old[l.Code] = true
	}
	during.Range(func(k, _ any) bool { old[k.(string)] = true; return true })
	for i := range 100 {
		l, err := dst.Nodes[i%3].Links().Create(ctx(t), link.CreateRequest{URL: "https://after.example/"})
		if err != nil {
			t.Fatal(err)
		}
		if old[l.Code] {
			t.Fatalf("code %s handed out again", l.Code)
		}
	}
	if rep.NextID < srcNext || rep.NextID < man.NextID {
		t.Fatalf("IDs from %d on are free in the new cluster; the old one had handed out up to %d", rep.NextID, srcNext)
	}

	if _, err := d.Admin().Restore(transfer(t), bytes.NewReader(file.Bytes()), false); !errors.Is(err, backup.ErrNotEmpty) {
		t.Fatalf("a restore into a cluster with links: %v", err)
	}
	again, err := d.Admin().Restore(transfer(t), bytes.NewReader(file.Bytes()), true)
	if err != nil || again.Links != 0 || uint64(again.Present) != records {
		t.Fatalf("the restore resumed: %+v, %v", again, err)
	}
}

// transfer bounds a whole backup or restore: each of its steps has its
// own 30 s bound, and a loaded machine (the chaos cases beside these
// tests) needs more than ctx's 20 s for all of them.
func transfer(tb testing.TB) context.Context { return testkit.Context(tb, 2*time.Minute) }

// acked is a write acknowledged at a time.
type acked struct {
	url string
	at  time.Time
}

// flip returns b with the byte at i changed.
func flip(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 0x55
	return c
}
