package jepsen

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/linkraft/linkraft/jepsen/checker"
)

// TestCheckersCatchBugs runs the harness against linknode built with
// deliberate bugs (-tags jepsenbugs) and requires the checker made for each
// kind of bug to call the run invalid: checkers that cannot fail prove
// nothing. Each run is a real 3-node cluster in network namespaces.
func TestCheckersCatchBugs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces and nftables (CI runs as root)")
	}
	if testing.Short() {
		t.Skip("starts three clusters (about a minute)")
	}
	ctx := context.Background()
	bin := filepath.Join(t.TempDir(), "linknode-bugs")
	if err := buildLinknode(ctx, bin, "jepsenbugs", false); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		bug, workload, nemesis, checker string
	}{
		// A replica answers its own miss: a create acknowledged on
		// another node is not there yet.
		{bug: "follower-read", workload: "ryw", nemesis: "none", checker: "ryw"},
		// IDs from a local counter: codes from no lease (and colliding
		// ones, which create-if-absent turns into retries).
		{bug: "no-lease", workload: "unique-ids", nemesis: "none", checker: "unique-ids"},
		// Creates whose commit failed are acknowledged: a kill or a
		// partition loses them.
		{bug: "early-ack", workload: "set", nemesis: "kill-leader,partition-leader", checker: "set"},
		// Click batches applied twice under different node names: the
		// per-node sequence check cannot catch it.
		{bug: "click-double", workload: "counter", nemesis: "none", checker: "counter"},
	}
	for _, c := range cases {
		t.Run(c.bug, func(t *testing.T) {
			// early-ack is caught only if some create's commit fails
			// while it runs: give the faults more turns (it passed
			// 12 s runs on a quiet machine, not under disk writeback).
			limit := 12 * time.Second
			if c.bug == "early-ack" {
				limit = 30 * time.Second
			}
			out, err := Run(ctx, Options{
				Name: c.bug, Nodes: 3, TimeLimit: limit, Rate: 150,
				Workloads: c.workload, Nemesis: c.nemesis, NemesisInterval: 3 * time.Second,
				Binary: bin, Bugs: []string{c.bug}, Store: t.TempDir(),
				Prefix: "lkb", Subnet: netip.MustParsePrefix("10.79.0.0/24"), Log: testWriter{t},
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range out.Results {
				if r.Checker == c.checker {
					if r.Valid != checker.Invalid {
						t.Fatalf("%s checker judged a %s build %v: %s", c.checker, c.bug, r.Valid, r.Summary)
					}
					t.Logf("%s: %s", c.checker, r.Summary)
					return
				}
			}
			t.Fatalf("no %s result", c.checker)
		})
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}
