package cluster

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/linkraft/linkraft/internal/testcluster"
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
	tc := newTestCluster(t, 3, 3)
	disk := tmpfs.Mount(t, "96m")
	tc.cfgs[2].DataDir = filepath.Join(disk, "n3")
	for i := range tc.cfgs {
		tc.cfgs[i].MinFreeBytes = 24 << 20
		tc.cfgs[i].StorageInterval = 50 * time.Millisecond
	}
	tc.startAll(0, 1, 2)
	tc.waitReplicated(3)
	before, err := tc.nodes[0].Create(ctx(t), link.CreateRequest{URL: "https://before.example/"})
	if err != nil {
		t.Fatal(err)
	}
	filler := tmpfs.Fill(t, disk, 16<<20)
	testcluster.WaitFor(t, 10*time.Second, "n3's alarm", func() bool { return tc.nodes[2].Storage().Alarm })
	for _, n := range tc.live() {
		testcluster.WaitFor(t, 10*time.Second, n.ID()+" to hear of n3's alarm", func() bool { return n.gossip.fullNodes()["n3"] || n.ID() == "n3" })
	}
	for _, n := range tc.live() {
		if _, err := n.Create(ctx(t), link.CreateRequest{URL: "https://refused.example/"}); !errors.Is(err, link.ErrInsufficientStorage) {
			t.Fatalf("%s: create under the alarm: %v", n.ID(), err)
		}
		if _, err := n.Get(ctx(t), before.Code, true); err != nil {
			t.Fatalf("%s: consistent read under the alarm: %v", n.ID(), err)
		}
		if _, err := n.Resolve(ctx(t), before.Code); err != nil {
			t.Fatalf("%s: redirect under the alarm: %v", n.ID(), err)
		}
	}
	if st := tc.nodes[2].Status().Storage; !st.Alarm || st.Reason == "" {
		t.Fatalf("status storage %+v", st)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	testcluster.WaitFor(t, 10*time.Second, "creates to resume", func() bool {
		_, err := tc.nodes[1].Create(ctx(t), link.CreateRequest{URL: "https://after.example/"})
		return err == nil
	})
	if err := tc.nodes[0].Delete(ctx(t), before.Code); err != nil {
		t.Fatal(err)
	}
}
