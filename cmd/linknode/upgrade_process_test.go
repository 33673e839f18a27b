package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/internal/testkit"
)

// previousBinary builds linknode with the tag linkraft_level6: the
// release before this one, as far as feature levels go.
func previousBinary(tb testing.TB) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "linknode-level6")
	out, err := exec.Command("go", "build", "-tags", "linkraft_level6", "-o", p, ".").CombinedOutput()
	if err != nil {
		tb.Fatalf("build the previous level: %v\n%s", err, out)
	}
	return p
}

// TestRollingUpgradeFromThePreviousLevel: three nodes of the previous
// release serve while clients write; each is stopped (SIGTERM) and started
// again on this version, one at a time. Every create is acknowledged
// within its retries and redirects on every node at the end; a drain
// (feature level 7) is refused as an upgrade still under way while any
// node runs level 6, and is judged on its merits once none does; the
// previous release refuses a data dir this version has run, and starts on
// it, serving every link, once this version has run it at -feature-level 6
// (the rollback README describes; it moves the Raft logs back out of the
// node's shared file).
func TestRollingUpgradeFromThePreviousLevel(t *testing.T) {
	t.Parallel()
	old := previousBinary(t)
	addrs := make([]procAddrs, 3)
	dirs := make([]string, 3)
	var gossips []string
	for i := range addrs {
		addrs[i] = newAddrs(t)
		dirs[i] = t.TempDir()
		gossips = append(gossips, addrs[i].gossip)
	}
	keyFile := testKeyFile(t)
	env := []string{"LINKNODE_ADMIN_KEY=" + testAdminKey}
	flags := func(i int) []string {
		return []string{"-node-id", fmt.Sprintf("n%d", i+1), "-bootstrap-expect", "3",
			"-join", strings.Join(gossips, ","), "-shards", "4", "-cluster-key-file", keyFile}
	}
	procs := make([]*proc, 3)
	var current atomic.Pointer[[]*proc] // what the writers may call
	publish := func() { c := append([]*proc(nil), procs...); current.Store(&c) }
	var wg sync.WaitGroup
	for i := range procs {
		procs[i] = launchBin(t, old, env, dirs[i], addrs[i], flags(i)...)
		wg.Go(func() { procs[i].waitReady(t) })
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	publish()
	levels := func() (int, int) {
		_, st, _, err := call("GET", procs[0].admin+"/admin/v1/cluster", "")
		if err != nil || st == nil {
			return -1, -1
		}
		f, _ := st["feature_level"].(float64)
		c, _ := st["cluster_level"].(float64)
		return int(f), int(c)
	}
	drain := func() int {
		st, _, _, err := call("POST", procs[0].admin+"/admin/v1/nodes/n3/drain", "")
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if f, c := levels(); f != 6 || c != 6 {
		t.Fatalf("the previous release: node level %d, cluster level %d", f, c)
	}

	// Writers: each create is retried on another node until it is
	// acknowledged, for at most 30 s.
	var (
		stop   atomic.Bool
		acked  sync.Map
		failed atomic.Value
		wwg    sync.WaitGroup
	)
	for w := range 2 {
		wwg.Go(func() {
			for k := 0; !stop.Load() && k < 3000; k++ {
				u := fmt.Sprintf("https://rolling.example/%d/%d", w, k)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				ok := false
				for try := 0; !ok && ctx.Err() == nil; try++ {
					live := *current.Load()
					p := live[(w+k+try)%len(live)]
					st, m, _, err := call("POST", p.base+"/api/v1/links", fmt.Sprintf(`{"url":%q}`, u))
					if err == nil && st == 201 {
						acked.Store(m["code"].(string), u)
						ok = true
					} else {
						select { // the next node, after a moment
						case <-ctx.Done():
						case <-time.After(50 * time.Millisecond):
						}
					}
				}
				cancel()
				if !ok {
					failed.Store(u)
					return
				}
			}
		})
	}

	for i := range procs {
		if err := procs[i].cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		<-procs[i].exited
		procs[i] = launchBin(t, binary(t), env, dirs[i], addrs[i], flags(i)...)
		procs[i].waitReady(t)
		publish()
		if i < len(procs)-1 {
			if st := drain(); st != 503 {
				t.Fatalf("a drain with %d nodes upgraded: %d, want 503 (upgrade under way)", i+1, st)
			}
		}
	}
	testkit.WaitFor(t, 30*time.Second, "the cluster at this version's level", func() bool {
		_, c := levels()
		return c == cluster.FeatureLevel
	})
	// Now judged on its merits: three nodes, three replicas, nowhere to go.
	if st := drain(); st != 409 {
		t.Fatalf("a drain after the upgrade: %d, want 409", st)
	}
	stop.Store(true)
	wwg.Wait()
	if u := failed.Load(); u != nil {
		t.Fatalf("the create of %v was not acknowledged within 30 s", u)
	}
	n := 0
	acked.Range(func(k, v any) bool {
		n++
		for _, p := range procs {
			st, _, h, err := call("GET", p.base+"/"+k.(string), "")
			if err != nil || st != 302 || h.Get("Location") != v.(string) {
				t.Fatalf("%s on %s: %d %v", k, p.base, st, err)
			}
		}
		return true
	})
	t.Logf("%d creates acknowledged through the rolling upgrade", n)

	// A rollback by swapping the binary back is refused, with the way out.
	if err := procs[2].cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-procs[2].exited
	out, err := exec.Command(old, "-data-dir", dirs[2], "-http-addr", addrs[2].http, "-raft-addr", addrs[2].raft,
		"-gossip-addr", addrs[2].gossip, "-admin-addr", addrs[2].admin, "-node-id", "n3", "-cluster-key-file", keyFile).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "newer version") || !strings.Contains(string(out), "-feature-level 6") {
		t.Fatalf("the previous release on a level-%d data dir: %v\n%s", cluster.FeatureLevel, err, out)
	}

	// The way out, as the refusal says: this version at -feature-level 6
	// first (which also moves the node's Raft logs back out of its shared
	// file), then the previous release, which starts on the data dir and
	// serves every link written through the upgrade.
	if _, err := os.Stat(filepath.Join(dirs[2], "raft-log")); err != nil {
		t.Fatalf("this version kept no shared Raft log: %v", err)
	}
	procs[2] = launchBin(t, binary(t), env, dirs[2], addrs[2], append(flags(2), "-feature-level", "6")...)
	procs[2].waitReady(t)
	if err := procs[2].cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-procs[2].exited
	if _, err := os.Stat(filepath.Join(dirs[2], "raft-log")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the shared Raft log is still there after a run at level 6: %v", err)
	}
	procs[2] = launchBin(t, old, env, dirs[2], addrs[2], flags(2)...)
	procs[2].waitReady(t)
	acked.Range(func(k, v any) bool {
		st, _, h, err := call("GET", procs[2].base+"/"+k.(string), "")
		if err != nil || st != 302 || h.Get("Location") != v.(string) {
			t.Fatalf("%s on the rolled-back node: %d %v", k, st, err)
		}
		return true
	})
}
