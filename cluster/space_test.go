package cluster_test

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/internal/testcluster"
	"github.com/linkraft/linkraft/internal/testkit"
	"github.com/linkraft/linkraft/internal/tmpfs"
	"github.com/linkraft/linkraft/link"
)

// TestStorageAlarmRefusesWritesAndClears: n3's data dir is on a small
// tmpfs with a free-space floor. Filled to under the floor, n3 raises its
// alarm and gossips it: creates through any node are refused with
// ErrInsufficientStorage before any disk fills, while reads, deletes and
// redirects go on. Freed, the alarm clears and writes resume, with no
// restart.
func TestStorageAlarmRefusesWritesAndClears(t *testing.T) {
	t.Parallel()
	tc := testcluster.New(t, testcluster.Options{Size: 3, Expect: 3})
	disk := tmpfs.Mount(t, "96m")
	tc.Cfgs[2].DataDir = filepath.Join(disk, "n3")
	for i := range tc.Cfgs {
		tc.Cfgs[i].MinFreeBytes = 24 << 20
		tc.Cfgs[i].StorageInterval = 50 * time.Millisecond
	}
	tc.StartAll(0, 1, 2)
	tc.WaitReplicated(3)
	before, err := tc.Nodes[0].Links().Create(ctx(t), link.CreateRequest{URL: "https://before.example/"})
	if err != nil {
		t.Fatal(err)
	}
	filler := tmpfs.Fill(t, disk, 16<<20)
	testkit.WaitFor(t, 10*time.Second, "n3's alarm", func() bool { return tc.Nodes[2].Admin().Storage().Alarm })
	for _, n := range tc.Live() {
		testkit.WaitFor(t, 10*time.Second, n.ID()+" to hear of n3's alarm", func() bool { return n.FullNodes()["n3"] || n.ID() == "n3" })
	}
	for _, n := range tc.Live() {
		if _, err := n.Links().Create(ctx(t), link.CreateRequest{URL: "https://refused.example/"}); !errors.Is(err, link.ErrInsufficientStorage) {
			t.Fatalf("%s: create under the alarm: %v", n.ID(), err)
		}
		if _, err := n.Links().Get(ctx(t), before.Code, true); err != nil {
			t.Fatalf("%s: consistent read under the alarm: %v", n.ID(), err)
		}
		if _, err := n.Links().Resolve(ctx(t), before.Code); err != nil {
			t.Fatalf("%s: redirect under the alarm: %v", n.ID(), err)
		}
	}
	if st := tc.Nodes[2].Admin().Status().Storage; !st.Alarm || st.Reason == "" {
		t.Fatalf("status storage %+v", st)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "creates to resume", func() bool {
		_, err := tc.Nodes[1].Links().Create(ctx(t), link.CreateRequest{URL: "https://after.example/"})
		return err == nil
	})
	if err := tc.Nodes[0].Links().Delete(ctx(t), before.Code); err != nil {
		t.Fatal(err)
	}
}

// TestVisitFloodStaysInItsBudget: a flood of redirects on a node whose
// quota is small fills its raw visit file to its budget (a quarter of the
// quota) and no further: the rest are shed and counted, every click is
// still counted exactly, the storage alarm (for link data) stays off and
// creates go on. Without the budget the visit file alone passed the quota
// and the alarm refused every create.
func TestVisitFloodStaysInItsBudget(t *testing.T) {
	t.Parallel()
	const quota, clicks = 8 << 20, 60_000
	cfg := cluster.Config{DataDir: t.TempDir(), Shards: 2, ClusterKey: testcluster.Key(t), QuotaBytes: quota, StorageInterval: 50 * time.Millisecond,
		Analytics: &cluster.AnalyticsConfig{Visits: true, FlushInterval: 100 * time.Millisecond}}
	n := testcluster.Node(t, cfg)
	defer n.Close()
	l, err := n.Links().Create(ctx(t), link.CreateRequest{URL: "https://flooded.example/", Redirect: link.DefaultRedirect})
	if err != nil {
		t.Fatal(err)
	}
	rec := n.Analytics().Recorder()
	for i := range clicks {
		c := link.Click{Code: l.Code, Time: time.Now(), IP: netip.AddrFrom4([4]byte{198, 51, byte(i >> 8), byte(i)}),
			UA: "Mozilla/5.0 (X11; Linux x86_64; rv:130.0) Gecko/20100101 Firefox/130.0", Referer: "https://news.example/item?id=" + strconv.Itoa(i)}
		if !rec.Record(c) {
			t.Fatalf("click %d dropped", i)
		}
		if i%10_000 == 9_999 {
			if left := rec.Flush(ctx(t)); left != 0 {
				t.Fatalf("%d clicks unacknowledged", left)
			}
		}
	}
	if got, err := n.Analytics().ClickCount(ctx(t), l.Code); err != nil || got != clicks {
		t.Fatalf("click count %d, %v; want %d", got, err, clicks)
	}
	testkit.WaitFor(t, 10*time.Second, "a storage check after the flood", func() bool {
		return n.Admin().Storage().VisitsShed > 0
	})
	st := n.Admin().Storage()
	if st.Alarm || st.VisitMaxBytes != quota/4 || st.VisitBytes > st.VisitMaxBytes || st.UsedBytes >= quota {
		t.Fatalf("storage after the flood: %+v", st)
	}
	if _, err := n.Links().Create(ctx(t), link.CreateRequest{URL: "https://after-the-flood.example/"}); err != nil {
		t.Fatalf("create after the flood: %v", err)
	}
}
