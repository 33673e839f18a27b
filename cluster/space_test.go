package cluster_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

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
