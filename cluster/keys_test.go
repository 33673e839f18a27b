package cluster_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/internal/testcluster"
	"github.com/linkraft/linkraft/internal/testkit"
	"github.com/linkraft/linkraft/link"
)

// effectiveEverywhere polls every node until cond holds on it, and returns
// how long the slowest took since start (the zero time: now).
func effectiveEverywhere(t *testing.T, nodes []*cluster.Node, what string, cond func(n *cluster.Node) bool, start ...time.Time) time.Duration {
	t.Helper()
	begin := time.Now()
	if len(start) > 0 {
		begin = start[0]
	}
	var wg sync.WaitGroup
	took := make([]time.Duration, len(nodes))
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !cond(n) {
				if time.Since(begin) > 10*time.Second {
					took[i] = -1
					return
				}
				time.Sleep(time.Millisecond)
			}
			took[i] = time.Since(begin)
		}()
	}
	wg.Wait()
	var slowest time.Duration
	for i, d := range took {
		if d < 0 {
			t.Fatalf("%s: never effective on %s", what, nodes[i].ID())
		}
		slowest = max(slowest, d)
	}
	return slowest
}

func TestKeysAndBlocklistTakeEffectOnEveryNodeWithinASecond(t *testing.T) {
	t.Parallel()
	tc := testcluster.New(t, testcluster.Options{Size: 3, Expect: 3})
	tc.StartAll(0, 1, 2)
	tc.WaitReplicated(3)
	nodes := tc.Live()

	// The first admin key: made once, by the meta leader, into its data
	// dir's admin.key, and known to every node.
	var first string
	testkit.WaitFor(t, 20*time.Second, "the first admin key", func() bool {
		for _, n := range nodes {
			if s, err := apikey.LoadSecret(filepath.Join(n.DataDir(), "admin.key")); err == nil {
				first = s
				return true
			}
		}
		return false
	})
	effectiveEverywhere(t, nodes, "first key", func(n *cluster.Node) bool { _, err := n.Keys().Authenticate(first); return err == nil })
	files := 0
	for _, n := range nodes {
		if _, err := os.Stat(filepath.Join(n.DataDir(), "admin.key")); err == nil {
			files++
		}
	}
	if keys, _ := nodes[0].Keys().List(); len(keys) != 1 || files != 1 || keys[0].Scopes != apikey.Admin {
		t.Fatalf("%d keys, %d admin.key files: %+v", len(keys), files, keys)
	}

	// A key made through one node works on every node; revoked through
	// another, it stops working on every node within a second.
	// Through followers of the meta group: they forward to the leader.
	var followers []*cluster.Node
	for _, n := range nodes {
		if !n.Meta().Group().IsLeader() {
			followers = append(followers, n)
		}
	}
	if len(followers) < 2 {
		t.Fatalf("%d meta followers", len(followers))
	}
	secret, k, err := followers[0].Keys().Create(ctx(t), apikey.Request{Name: "ci", Owner: "alice", Scopes: apikey.LinksRead | apikey.LinksWrite})
	if err != nil {
		t.Fatal(err)
	}
	// The node that made it knows it when CreateKey returns, leader or not.
	if _, err := followers[0].Keys().Authenticate(secret); err != nil {
		t.Fatalf("the key does not work on the node that made it: %v", err)
	}
	effectiveEverywhere(t, nodes, "new key", func(n *cluster.Node) bool {
		got, err := n.Keys().Authenticate(secret)
		return err == nil && got.Owner == "alice"
	})
	revoked := time.Now()
	if err := followers[1].Keys().Revoke(ctx(t), k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := followers[1].Keys().Authenticate(secret); !errors.Is(err, apikey.ErrUnauthorized) {
		t.Fatalf("the revoking node still takes the key: %v", err)
	}
	d := effectiveEverywhere(t, nodes, "revocation", func(n *cluster.Node) bool {
		_, err := n.Keys().Authenticate(secret)
		return errors.Is(err, apikey.ErrUnauthorized)
	}, revoked)
	t.Logf("revocation effective on every node %v after the call began", d)
	if d > time.Second {
		t.Fatalf("revocation took %v on the slowest node, want at most 1s", d)
	}
	if err := nodes[0].Keys().Revoke(ctx(t), k.ID); !errors.Is(err, apikey.ErrNotFound) {
		t.Fatalf("revoke again: %v", err)
	}

	// The blocklist, likewise.
	l, err := nodes[0].Links().Create(ctx(t), link.CreateRequest{URL: "https://sub.evil.example/x"})
	if err != nil {
		t.Fatal(err)
	}
	blocked := time.Now()
	if err := nodes[1].Keys().SetBlocked(ctx(t), "evil.example", true); err != nil {
		t.Fatal(err)
	}
	d = effectiveEverywhere(t, nodes, "block", func(n *cluster.Node) bool { return n.Keys().BlockedURL(l.URL) && n.Keys().Blocked("a.b.evil.example") }, blocked)
	t.Logf("blocklist effective on every node %v after the call began", d)
	if d > time.Second {
		t.Fatalf("blocking took %v on the slowest node", d)
	}
	if nodes[2].Keys().Blocked("notevil.example") || nodes[2].Keys().BlockedURL("https://example.com/evil.example") {
		t.Fatal("blocklist matches too much")
	}
	if err := nodes[2].Keys().SetBlocked(ctx(t), "evil.example", false); err != nil {
		t.Fatal(err)
	}
	effectiveEverywhere(t, nodes, "unblock", func(n *cluster.Node) bool { return !n.Keys().BlockedURL(l.URL) })
}

// TestNewFieldsWaitForEveryNode: while a live member gossips an older
// feature level, a link's DropQuery (a field that member would skip, and
// so hold other state) is refused with link.ErrUpgradeNeeded, in a create, a
// bulk create and a patch; everything else goes on.
func TestNewFieldsWaitForEveryNode(t *testing.T) {
	t.Parallel()
	tc := testcluster.New(t, testcluster.Options{Size: 2, Expect: 2})
	tc.Cfgs[1].FeatureLevel = command.LevelLinkMeta - 1
	tc.StartAll(0, 1)
	n := tc.Nodes[0]
	testkit.WaitFor(t, 10*time.Second, "n2 in n1's gossip", func() bool { return len(n.GossipMembers()) == 2 })
	if _, err := n.Links().Create(ctx(t), link.CreateRequest{URL: "https://e.example/a", Alias: "old-ok"}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Links().Create(ctx(t), link.CreateRequest{URL: "https://e.example/b", Alias: "new-field", DropQuery: true}); !errors.Is(err, link.ErrUpgradeNeeded) {
		t.Fatalf("create with DropQuery beside an older node: %v", err)
	}
	res := n.Links().CreateMany(ctx(t), []link.CreateRequest{{URL: "https://e.example/c"}, {URL: "https://e.example/d", DropQuery: true}})
	if res[0].Err != nil || !errors.Is(res[1].Err, link.ErrUpgradeNeeded) {
		t.Fatalf("bulk beside an older node: %+v", res)
	}
	drop := true
	if _, err := n.Links().Update(ctx(t), "old-ok", link.Patch{DropQuery: &drop}); !errors.Is(err, link.ErrUpgradeNeeded) {
		t.Fatalf("patch of DropQuery beside an older node: %v", err)
	}
	title := "Docs"
	if _, err := n.Links().Update(ctx(t), "old-ok", link.Patch{Title: &title}); !errors.Is(err, link.ErrUpgradeNeeded) {
		t.Fatalf("patch of Title beside an older node: %v", err)
	}
	if _, err := n.Links().Create(ctx(t), link.CreateRequest{URL: "https://e.example/t", Description: "x"}); !errors.Is(err, link.ErrUpgradeNeeded) {
		t.Fatalf("create with a description beside an older node: %v", err)
	}
	if _, err := n.Links().List(ctx(t), link.ListQuery{Limit: 10}); !errors.Is(err, link.ErrUpgradeNeeded) {
		t.Fatalf("a listing beside an older node: %v", err)
	}
	if _, err := n.Links().Resolve(ctx(t), "new-field"); !errors.Is(err, link.ErrNotFound) {
		t.Fatalf("the refused create was stored: %v", err)
	}
}

// TestPasswordsAndRulesWaitForEveryNode: beside a member at the level
// before them, a link's password and rules (and Idempotency-Key claims) are
// refused (that member would
// store the link without them and redirect without asking or without the
// rules), while the fields of its own level go on.
func TestPasswordsAndRulesWaitForEveryNode(t *testing.T) {
	t.Parallel()
	tc := testcluster.New(t, testcluster.Options{Size: 2, Expect: 2})
	tc.Cfgs[1].FeatureLevel = command.LevelLinkAccess - 1
	tc.StartAll(0, 1)
	n := tc.Nodes[0]
	testkit.WaitFor(t, 10*time.Second, "n2 in n1's gossip", func() bool { return len(n.GossipMembers()) == 2 })
	if _, err := n.Links().Create(ctx(t), link.CreateRequest{URL: "https://e.example/a", Alias: "titled", Title: "level 3 is here"}); err != nil {
		t.Fatalf("a field of the older node's level: %v", err)
	}
	const hash = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	if _, err := n.Links().Create(ctx(t), link.CreateRequest{URL: "https://e.example/b", Alias: "locked", PasswordHash: hash}); !errors.Is(err, link.ErrUpgradeNeeded) {
		t.Fatalf("create with a password beside an older node: %v", err)
	}
	h := hash
	if _, err := n.Links().Update(ctx(t), "titled", link.Patch{PasswordHash: &h}); !errors.Is(err, link.ErrUpgradeNeeded) {
		t.Fatalf("patch of a password beside an older node: %v", err)
	}
	res := n.Links().CreateMany(ctx(t), []link.CreateRequest{{URL: "https://e.example/c", PasswordHash: hash}})
	if !errors.Is(res[0].Err, link.ErrUpgradeNeeded) {
		t.Fatalf("bulk with a password beside an older node: %+v", res)
	}
	rules := []link.Rule{{Device: link.DeviceIOS, URL: "https://apps.example/"}}
	if _, err := n.Links().Update(ctx(t), "titled", link.Patch{Rules: &rules}); !errors.Is(err, link.ErrUpgradeNeeded) {
		t.Fatalf("patch of rules beside an older node: %v", err)
	}
	if _, err := n.Links().Create(ctx(t), link.CreateRequest{URL: "https://e.example/r", Rules: rules}); !errors.Is(err, link.ErrUpgradeNeeded) {
		t.Fatalf("create with rules beside an older node: %v", err)
	}
	// An Idempotency-Key's claim is an entry that node cannot apply.
	if _, _, err := n.Links().CreateOnce(ctx(t), link.CreateRequest{URL: "https://e.example/i"}, link.IdempotencyKey("o", "k", nil)); !errors.Is(err, link.ErrUpgradeNeeded) {
		t.Fatalf("a create with an Idempotency-Key beside an older node: %v", err)
	}
	if l, err := n.Links().Get(ctx(t), "titled", true); err != nil || l.PasswordHash != "" || l.Rules != nil {
		t.Fatalf("the refused patch was applied: %+v %v", l, err)
	}
}

// TestPasswordsWaitForDownOlderNodes: the live check is not enough for
// fields an older replica would drop. A node of the level before
// passwords that is down when one is set would come back, apply the
// entry without the hash and redirect without asking. So passwords wait
// for every registered node's recorded level: refused while the older
// node is down (naming it), and taken once it is back on this version
// (its replica then holds the hash). A node rolled back to a version from
// before levels were recorded keeps its recorded level: only the live
// check holds passwords back while it runs. (A rollback to a version that
// records levels, recorded lower, needs a level above this version's: the
// meta package's TestAdmitRecordsEachLevel has it.)
func TestPasswordsWaitForDownOlderNodes(t *testing.T) {
	t.Parallel()
	tc := testcluster.New(t, testcluster.Options{Size: 3, Expect: 3})
	tc.Cfgs[2].FeatureLevel = command.LevelLinkAccess - 1
	tc.StartAll(0, 1, 2)
	n := tc.Nodes[0]
	const hash = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	locked := func(alias string) error {
		_, err := n.Links().Create(ctx(t), link.CreateRequest{URL: "https://e.example/" + alias, Alias: alias, PasswordHash: hash})
		return err
	}
	testkit.WaitFor(t, 10*time.Second, "n3 in n1's gossip", func() bool { return len(n.GossipMembers()) == 3 })
	if err := locked("while-live"); !errors.Is(err, link.ErrUpgradeNeeded) {
		t.Fatalf("a password beside a live older node: %v", err)
	}

	tc.Stop(2)
	testkit.WaitFor(t, 10*time.Second, "n3 gone from n1's gossip", func() bool { return n.ClusterAt(command.LevelLinkAccess) })
	// n1 and n2 may have been registered while n3 was live, without a
	// level: the meta leader admits them again now.
	testkit.WaitFor(t, 10*time.Second, "n1 and n2 recorded", func() bool {
		for _, id := range []string{"n1", "n2"} {
			if m, ok, err := n.Meta().Member(id); err != nil || !ok || m.Level != cluster.FeatureLevel {
				return false
			}
		}
		return true
	})
	err := locked("while-down")
	if !errors.Is(err, link.ErrUpgradeNeeded) || !strings.Contains(err.Error(), "node n3") {
		t.Fatalf("a password while an older node is down: %v", err)
	}
	res := n.Links().CreateMany(ctx(t), []link.CreateRequest{{URL: "https://e.example/bulk", Rules: []link.Rule{{Device: link.DeviceIOS, URL: "https://apps.example/"}}}})
	if !errors.Is(res[0].Err, link.ErrUpgradeNeeded) {
		t.Fatalf("rules in a bulk while an older node is down: %+v", res)
	}
	if _, err := n.Links().Create(ctx(t), link.CreateRequest{URL: "https://e.example/plain", Alias: "plain"}); err != nil {
		t.Fatalf("a plain link while an older node is down: %v", err)
	}

	// Back on this version: recorded, and the password goes through.
	tc.Cfgs[2].FeatureLevel = cluster.FeatureLevel
	tc.Start(2)
	testkit.WaitFor(t, 30*time.Second, "a password once n3 is back upgraded", func() bool { return locked("after-upgrade") == nil })
	testkit.WaitFor(t, 10*time.Second, "the hash on n3's replica", func() bool {
		l, ok := tc.Nodes[2].Links().ResolveLocal("after-upgrade")
		return ok && l.PasswordHash == hash
	})

	// Rolled back to the level of passwords, from before levels were
	// recorded: refused while it runs (the live check), its record kept.
	tc.Stop(2)
	tc.Cfgs[2].FeatureLevel = command.LevelLinkAccess
	tc.Start(2)
	testkit.WaitFor(t, 10*time.Second, "n3 back in n1's gossip", func() bool { return !n.ClusterAt(cluster.FeatureLevel) })
	if m, ok, err := n.Meta().Member("n3"); err != nil || !ok || m.Level != cluster.FeatureLevel {
		t.Fatalf("n3's record after a rollback to a version without levels: %+v %v %v", m, ok, err)
	}
	if err := n.Supports(cluster.FeatureLevel); !errors.Is(err, link.ErrUpgradeNeeded) {
		t.Fatalf("level %d with n3 live at %d: %v", cluster.FeatureLevel, command.LevelLinkAccess, err)
	}
	if err := locked("after-rollback"); err != nil {
		t.Fatalf("a password with n3 recorded at %d and live at %d: %v", cluster.FeatureLevel, command.LevelLinkAccess, err)
	}
}
