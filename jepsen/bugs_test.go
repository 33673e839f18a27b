package jepsen

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linkraft/linkraft/internal/bugs"
	"github.com/linkraft/linkraft/jepsen/checker"
)

// bugCase is a deliberate fault and the checker that must catch it.
type bugCase struct {
	bug, workload, nemesis string
	// caughtBy must each judge the run invalid, with an anomaly of one of
	// kinds; mayAlso may (they see the same damage from another side);
	// every other checker must judge it valid.
	caughtBy []string
	kinds    []string
	mayAlso  []string
	limit    time.Duration
	// alone cases run in a phase of their own (LINKRAFT_JEPSEN_ALONE=1,
	// which scripts/test.sh sets after the chaos run), not beside the
	// other packages' tests: power-loss serves every node's disk through
	// FUSE from the test process, a load that starved the cluster tests
	// running beside it.
	alone bool
}

// bugCases: every checker is shown able to fail by at least one fault
// (JEPSEN.md has the same table).
var bugCases = []bugCase{
	// A replica answers its own miss: a create acknowledged on another
	// node is not there yet.
	{bug: bugs.FollowerRead, workload: "ryw", nemesis: "none", caughtBy: []string{"ryw"}, kinds: []string{"stale-read"}},
	// IDs from a local counter: codes from no lease (and colliding ones,
	// which create-if-absent turns into retries).
	{bug: bugs.NoLease, workload: "unique-ids", nemesis: "none", caughtBy: []string{"unique-ids"}, kinds: []string{"outside-leases"}},
	// Creates whose commit failed are acknowledged: when the leader dies,
	// creates forwarded to it are acknowledged and never stored.
	{bug: bugs.EarlyAck, workload: "set", nemesis: "kill-leader", caughtBy: []string{"set"}, kinds: []string{"lost", "not-everywhere"},
		limit: 20 * time.Second},
	// Click batches applied twice under different node names: the
	// per-node sequence check cannot catch it.
	{bug: bugs.ClickDouble, workload: "counter", nemesis: "none", caughtBy: []string{"counter"}, kinds: []string{"over-count"}},
	// Linearizable reads answered by followers from their own state.
	{bug: bugs.StaleConsistent, workload: "register", nemesis: "none", caughtBy: []string{"register"}, kinds: []string{"not-linearizable"}},
	// A create revives a deleted code: the tombstone probes see it.
	{bug: bugs.TombstoneReuse, workload: "register", nemesis: "none", caughtBy: []string{"register"}, kinds: []string{"not-linearizable"}},
	// Replicas keep serving the cached link after an update or delete.
	{bug: bugs.NoInvalidate, workload: "register", nemesis: "none", caughtBy: []string{"converge"}, kinds: []string{"stale-after-bound"}},
	// A create retried under a fresh code: one attempt, two links.
	{bug: bugs.RetryNewCode, workload: "set,unique-ids", nemesis: "none", caughtBy: []string{"set"}, kinds: []string{"duplicated"}},
	// Click batches "committed" without being proposed.
	{bug: bugs.DropClickBatch, workload: "counter", nemesis: "none", caughtBy: []string{"counter"}, kinds: []string{"lost-clicks"}},
	// The fast path panics once per process (recovered, logged).
	{bug: bugs.PanicOnce, workload: "ryw", nemesis: "none", caughtBy: []string{"logs"}, kinds: []string{"panic"}},
	// After each kill-all, every replica undoes the last link write it
	// applied (one replica per shard the last two): the final reads
	// through the leaders see acknowledged writes undone, and the replicas
	// differ. converge may see a node serve from a diverged replica.
	{bug: bugs.LoseLastApply, workload: "register", nemesis: "kill-all", caughtBy: []string{"replicas", "register"},
		kinds: []string{"replicas-diverged", "not-linearizable"}, mayAlso: []string{"converge"}, limit: 16 * time.Second},
	// Every node exits with status 3 ten seconds after its first start.
	{bug: bugs.ExitOnce, workload: "ryw", nemesis: "none", caughtBy: []string{"nodes"}, kinds: []string{"unexpected-exit"}},
	// The Raft logs skip fdatasync: a power cut to every node (lazyfs
	// drops what was not synced) loses acknowledged creates. The replicas
	// may disagree afterwards, and the state files may be ahead of the
	// logs that lost their tails.
	{bug: bugs.LogNoSync, workload: "set", nemesis: "power-loss", caughtBy: []string{"set"}, kinds: []string{"lost", "not-everywhere"},
		mayAlso: []string{"replicas", "converge", "nodes", "logs"}, limit: 16 * time.Second, alone: true},
}

// TestCheckersCatchBugs runs the harness against linknode built with
// deliberate bugs (-tags jepsenbugs, package internal/bugs) and requires
// the checker made for each kind of bug to call the run invalid, with the
// anomaly kind it is made to find, while every other checker calls it
// valid: checkers that cannot fail prove nothing, and a switch caught by
// the wrong checker proves the wrong thing. Each run is a real 3-node
// cluster in network namespaces.
func TestCheckersCatchBugs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces and nftables (CI runs as root)")
	}
	if testing.Short() {
		t.Skip("starts a dozen clusters (about three minutes)")
	}
	covered := map[string]bool{}
	for _, c := range bugCases {
		covered[c.bug] = true
	}
	for _, b := range bugs.All {
		if !covered[b] {
			t.Errorf("bug switch %s has no case", b)
		}
	}
	alone := os.Getenv("LINKRAFT_JEPSEN_ALONE") != ""
	for _, c := range bugCases {
		if c.alone && !alone {
			t.Logf("%s runs in its own phase (LINKRAFT_JEPSEN_ALONE=1 go test -run TestCheckersCatchBugs ./jepsen; scripts/test.sh does)", c.bug)
		}
	}
	ctx := context.Background()
	bin := filepath.Join(t.TempDir(), "linknode-bugs")
	if err := buildLinknode(ctx, bin, "jepsenbugs", false); err != nil {
		t.Fatal(err)
	}
	// The cases run bugCasesAtOnce at a time, each on its own namespaces
	// and subnet: they wait on their clusters more than they compute, and
	// go test's -parallel (the core count) would run two at a time here.
	sem := make(chan struct{}, bugCasesAtOnce)
	var wg sync.WaitGroup
	defer wg.Wait()
	for i, c := range bugCases {
		if c.alone != alone {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			t.Run(c.bug, func(t *testing.T) { runBugCase(t, i, c, bin) })
		})
	}
}

// bugCasesAtOnce is how many bug cases run at once.
const bugCasesAtOnce = 4

// runBugCase runs case c (the i-th) against the bug build bin and judges it.
func runBugCase(t *testing.T, i int, c bugCase, bin string) {
	ctx := context.Background()
	limit := c.limit
	if limit == 0 {
		limit = 12 * time.Second
	}
	out, err := Run(ctx, Options{
		Name: c.bug, Nodes: 3, TimeLimit: limit, Rate: 150,
		Workloads: c.workload, Nemesis: c.nemesis, NemesisInterval: 3 * time.Second,
		Binary: bin, Bugs: []string{c.bug}, Store: t.TempDir(),
		Prefix: fmt.Sprintf("lkb%c", 'a'+i), Subnet: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 79, byte(i), 0}), 24),
		Log: testWriter{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	judge(t, c, out.Results)
	if t.Failed() {
		// The store goes with the test: show the node logs' ends.
		for i := range 3 {
			path := filepath.Join(out.Dir, "nodes", fmt.Sprintf("n%d", i+1), "log")
			t.Logf("last lines of %s:\n%s", path, strings.Join(lastLines(path, 150), "\n"))
		}
	}
}

// judge checks one bug run's verdicts against its case.
func judge(t *testing.T, c bugCase, results []checker.Result) {
	t.Helper()
	seen := map[string]bool{}
	for _, r := range results {
		seen[r.Checker] = true
		switch {
		case slices.Contains(c.caughtBy, r.Checker):
			if r.Valid != checker.Invalid {
				t.Errorf("%s judged a %s build %v: %s", r.Checker, c.bug, r.Valid, r.Summary)
				continue
			}
			found := false
			for _, a := range r.Anomalies {
				found = found || slices.Contains(c.kinds, a.Kind)
			}
			if !found {
				t.Errorf("%s caught %s but with none of the anomaly kinds %v: %+v", r.Checker, c.bug, c.kinds, r.Anomalies)
			}
			t.Logf("%s: %s", r.Checker, r.Summary)
		case slices.Contains(c.mayAlso, r.Checker):
			t.Logf("%s (may also catch it): %v, %s", r.Checker, r.Valid, r.Summary)
		case r.Valid != checker.Valid:
			t.Errorf("%s, not made for %s, judged the run %v: %s %+v", r.Checker, c.bug, r.Valid, r.Summary, r.Anomalies)
		}
	}
	for _, want := range c.caughtBy {
		if !seen[want] {
			t.Errorf("no %s result", want)
		}
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}
