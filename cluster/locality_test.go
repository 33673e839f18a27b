package cluster_test

import (
	"fmt"
	"testing"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/idrange"
	"github.com/linkraft/linkraft/internal/testcluster"
	"github.com/linkraft/linkraft/link"
)

// leadsSome waits for balanced leaders and returns a node leading more
// than one shard but not all of them, and the shards it leads.
func leadsSome(t *testing.T, tc *testcluster.Cluster) *cluster.Node {
	t.Helper()
	tc.WaitBalanced()
	for _, n := range tc.Nodes {
		if led := testcluster.Leads(n); led > 1 && led < tc.Shards {
			return n
		}
	}
	t.Fatal("no node leads more than one shard and fewer than all")
	return nil
}

// leadingSome starts 3 nodes with every shard on each and returns them and
// a node leading more than one shard but not all (leadsSome).
func leadingSome(t *testing.T) (*testcluster.Cluster, *cluster.Node) {
	t.Helper()
	tc := testcluster.New(t, testcluster.Options{Size: 3, Expect: 3})
	tc.StartAll(0, 1, 2)
	tc.WaitReplicated(3)
	return tc, leadsSome(t, tc)
}

// ledHere reports whether n leads code's shard.
func ledHere(n *cluster.Node, code string) bool {
	s := n.LocalShard(n.Locate(code))
	return s != nil && s.Group().IsLeader()
}

// A generated code falls on a shard its node leads, so the create commits
// without a hop to another node. Without the preference half of them
// would (the node leads 2 of 4 shards); with it, a code misses only when
// 32 IDs in a row miss its focus, one shard of the 4 (1 in 10,000), or
// when the leadership moved.
func TestGeneratedCodesFallOnShardsLedWhereCreated(t *testing.T) {
	t.Parallel()
	tc, n := leadingSome(t)
	const creates = 40
	local := 0
	for i := range creates {
		l, err := n.Links().Create(ctx(t), link.CreateRequest{URL: fmt.Sprintf("https://local.example/%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if ledHere(n, l.Code) {
			local++
		}
		// Every node serves it at once, as any create.
		for _, m := range tc.Nodes {
			if got, err := m.Links().Resolve(ctx(t), l.Code); err != nil || got.URL != l.URL {
				t.Fatalf("%s on %s: %+v, %v", l.Code, m.ID(), got, err)
			}
		}
	}
	if local < creates-4 {
		t.Fatalf("%d of %d generated codes on shards %s leads (%d of %d shards); want nearly all", local, creates, n.ID(), testcluster.Leads(n), tc.Shards)
	}
	// An alias goes where the ring puts it, led here or not.
	elsewhere := 0
	for i := range 8 {
		alias := fmt.Sprintf("alias-local-%d", i)
		if _, err := n.Links().Create(ctx(t), link.CreateRequest{URL: "https://local.example/a", Alias: alias}); err != nil {
			t.Fatal(err)
		}
		if !ledHere(n, alias) {
			elsewhere++
		}
	}
	t.Logf("%d of %d codes local; %d of 8 aliases elsewhere", local, creates, elsewhere)
}

// On more than one node, a node's generated codes go to one shard it
// leads at a time (its focus, turned every second), so its group's Raft
// batches gather them. Codes whose create began and ended in one turn
// must fall on that turn's focus; ignoring it, they would spread over the
// 2 or 3 shards the node leads, and half or more would miss.
func TestGeneratedCodesFallOnTheFocus(t *testing.T) {
	t.Parallel()
	tc, n := leadingSome(t)
	in, hits := 0, 0
	shards := map[int]bool{}
	// Until 40 creates fell within a turn (on a loaded machine a create
	// can take long enough for many not to), at most 400 in all.
	for i := 0; in < 40 && i < 400; i++ {
		focus, turn := n.LocalFocus()
		l, err := n.Links().Create(ctx(t), link.CreateRequest{URL: fmt.Sprintf("https://focus.example/%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if _, after := n.LocalFocus(); focus == nil || after != turn {
			continue // the first create measures; a turn ended during this one
		}
		in++
		s := int(n.Locate(l.Code))
		shards[s] = true
		if focus[s] {
			hits++
		}
	}
	if in < 40 || hits < in-2 {
		t.Fatalf("%d of %d codes created within one turn fell on its focus (%d of %d shards led here); want all but 2 at most", hits, in, testcluster.Leads(n), tc.Shards)
	}
	t.Logf("%d of %d codes within a turn on its focus; %d shards used", hits, in, len(shards))
}

// Sequential codes are the shortest: they take every ID in turn, with no
// preference for shards led here.
func TestSequentialCodesTakeEveryID(t *testing.T) {
	t.Parallel()
	tc := testcluster.New(t, testcluster.Options{Size: 3, Expect: 3, Config: func(_ int, cfg *cluster.Config) {
		cfg.CodeMode = idrange.ModeSequential
	}})
	tc.StartAll(0, 1, 2)
	tc.WaitReplicated(3)
	n := leadsSome(t, tc)
	var prev uint64
	for i := range 20 {
		l, err := n.Links().Create(ctx(t), link.CreateRequest{URL: fmt.Sprintf("https://seq.example/%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		id, err := idrange.Decode(l.Code)
		if err != nil {
			t.Fatal(err)
		}
		// A reserved word is skipped; nothing else is.
		if i > 0 && (id <= prev || id > prev+2) {
			t.Fatalf("create %d: id %d after %d", i, id, prev)
		}
		prev = id
	}
}
