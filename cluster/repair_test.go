package cluster_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/internal/testcluster"
	"github.com/linkraft/linkraft/internal/testkit"
	"github.com/linkraft/linkraft/link"
	"github.com/linkraft/linkraft/raftgroup/nodelog"
)

// TestCorruptStateFileIsNamedAndRepaired: n3's state file of shard 0 is
// damaged while it is down. Its start fails with an error that names the
// file, the shard and the way out; linknode repair-shard sets the replica
// aside (refusing while the node runs), and the restarted node catches up
// from the leader to the same state as the other replicas.
func TestCorruptStateFileIsNamedAndRepaired(t *testing.T) {
	t.Parallel()
	tc := testcluster.New(t, testcluster.Options{Size: 3, Expect: 3})
	tc.StartAll(0, 1, 2)
	tc.WaitReplicated(3)
	for i := range 20 {
		if _, err := tc.Nodes[i%3].Links().Create(ctx(t), link.CreateRequest{URL: "https://r.example/" + string(rune('a'+i))}); err != nil {
			t.Fatal(err)
		}
	}
	dir := tc.Cfgs[2].DataDir
	if _, err := cluster.RepairGroup(dir, "0"); !errors.Is(err, cluster.ErrNodeRunning) {
		t.Fatalf("repair of a running node's shard: %v", err)
	}
	tc.Stop(2)
	state := filepath.Join(dir, "shards", "0", "state.db")
	f, err := os.OpenFile(state, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	garbage := make([]byte, 16<<10)
	for i := range garbage {
		garbage[i] = 0xAB
	}
	if _, err := f.WriteAt(garbage, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	err = tc.TryStart(2)
	if err == nil {
		t.Fatal("a node with a damaged state file started")
	}
	for _, want := range []string{state, "shard 0", "linknode repair-shard -data-dir " + dir + " 0"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("start error does not name %q: %v", want, err)
		}
	}
	rep, err := cluster.RepairGroup(dir, "0")
	if err != nil || rep.Alone {
		t.Fatal(rep, err)
	}
	if _, err := os.Stat(filepath.Join(rep.Aside, "state.db")); err != nil {
		t.Fatalf("the damaged file was not kept aside: %v", err)
	}
	// The replica's log is emptied in the node's shared log, its term and
	// vote kept.
	logs, err := nodelog.Open(nodelog.Config{Path: filepath.Join(dir, "raft-log")})
	if err != nil {
		t.Fatal(err)
	}
	first, ferr := logs.Log("shards/0").FirstIndex()
	last, lerr := logs.Log("shards/0").LastIndex()
	term, terr := logs.Log("shards/0").GetUint64([]byte("CurrentTerm"))
	logs.Close()
	if first != 0 || last != 0 || ferr != nil || lerr != nil || term == 0 || terr != nil {
		t.Fatalf("after the repair the log holds %d..%d (%v %v), term %d (%v)", first, last, ferr, lerr, term, terr)
	}
	tc.Start(2)
	testkit.WaitFor(t, 30*time.Second, "n3's shard 0 to match the others", func() bool {
		var sums []string
		for _, n := range tc.Live() {
			s := n.LocalShard(0)
			if s == nil {
				return false
			}
			d, err := s.Digest()
			if err != nil {
				return false
			}
			sums = append(sums, d.Sum)
		}
		return len(sums) == 3 && sums[0] == sums[1] && sums[1] == sums[2]
	})
}
