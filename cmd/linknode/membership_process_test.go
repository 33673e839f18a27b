package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linkraft/linkraft/internal/status"
	"github.com/linkraft/linkraft/internal/testkit"
)

// TestAddDrainRemoveReplaceCommands runs README's membership runbook on
// real processes: a fourth node joins a 3-node cluster and replicas move to
// it; linknode drain empties it; linknode remove takes it out; a new node
// joins in its place and takes replicas in turn; a drain of it is called
// off with drain -cancel. Every link redirects on every node throughout.
func TestAddDrainRemoveReplaceCommands(t *testing.T) {
	t.Parallel()
	addrs := make([]procAddrs, 5)
	var gossips []string
	for i := range addrs {
		addrs[i] = newAddrs(t)
		gossips = append(gossips, addrs[i].gossip)
	}
	keyFile := testKeyFile(t)
	launch := func(i int) *proc {
		return launchProc(t, t.TempDir(), addrs[i], "-node-id", fmt.Sprintf("n%d", i+1), "-bootstrap-expect", "3",
			"-join", strings.Join(gossips[:3], ","), "-shards", "4", "-cluster-key-file", keyFile)
	}
	procs := make([]*proc, 5)
	var wg sync.WaitGroup
	for i := range 3 {
		procs[i] = launch(i)
		wg.Go(func() { procs[i].waitReady(t) })
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	env := func(k string) (string, bool) {
		if k == "LINKNODE_KEY" {
			return testAdminKey, true
		}
		return "", false
	}
	cli := func(name string, args ...string) (int, string) {
		var out, errOut strings.Builder
		code := runCLI(name, append([]string{"-addr", procs[0].admin}, args...), env, &out, &errOut)
		return code, out.String() + errOut.String()
	}
	member := func(id string) status.Node {
		code, out := cli("members", "-o", "json")
		if code != 0 {
			t.Fatalf("members: %s", out)
		}
		var nodes []status.Node
		if err := json.Unmarshal([]byte(out), &nodes); err != nil {
			t.Fatalf("members: %v: %s", err, out)
		}
		for _, n := range nodes {
			if n.ID == id {
				return n
			}
		}
		return status.Node{ID: id, Replicas: -1}
	}
	replicas := func(id string) int { return member(id).Replicas }
	links := map[string]string{}
	for i := range 12 {
		u := fmt.Sprintf("https://runbook.example/%d", i)
		st, m, _, err := call("POST", procs[i%3].base+"/api/v1/links", fmt.Sprintf(`{"url":%q}`, u))
		if err != nil || st != 201 {
			t.Fatalf("create: %d %v %v", st, m, err)
		}
		links[m["code"].(string)] = u
	}
	redirects := func() {
		t.Helper()
		for _, p := range procs {
			if p == nil {
				continue
			}
			for code, u := range links {
				st, _, h, err := call("GET", p.base+"/"+code, "")
				if err != nil || st != 302 || h.Get("Location") != u {
					t.Fatalf("%s on %s: %d %v", code, p.base, st, err)
				}
			}
		}
	}

	// Add: 4 shards × 3 replicas over 4 nodes is 3 each.
	procs[3] = launch(3)
	procs[3].waitReady(t)
	testkit.WaitFor(t, 90*time.Second, "replicas moved to the new node", func() bool { return replicas("n4") == 3 })
	redirects()

	// Drain, then remove.
	if code, out := cli("drain", "n4"); code != 0 || !strings.Contains(out, "is drained") {
		t.Fatalf("drain: %d %s", code, out)
	}
	if n := replicas("n4"); n != 0 {
		t.Fatalf("n4 hosts %d replicas after its drain", n)
	}
	if code, out := cli("remove", "n4"); code != 0 {
		t.Fatalf("remove: %d %s", code, out)
	}
	procs[3].kill(t)
	procs[3] = nil
	redirects()

	// Replace: a new node takes replicas as n4 did.
	procs[4] = launch(4)
	procs[4].waitReady(t)
	testkit.WaitFor(t, 90*time.Second, "replicas moved to the replacement", func() bool { return replicas("n5") == 3 })
	redirects()
	// A drain called off: n5 is told to drain (without waiting), the drain
	// is cancelled, and n5 ends up hosting its share again.
	if code, out := cli("drain", "-wait=false", "n5"); code != 0 || !strings.Contains(out, "draining") {
		t.Fatalf("drain -wait=false: %d %s", code, out)
	}
	if code, out := cli("drain", "-cancel", "n5"); code != 0 || !strings.Contains(out, "no longer draining") {
		t.Fatalf("drain -cancel: %d %s", code, out)
	}
	if member("n5").Draining {
		t.Fatal("n5 still draining after drain -cancel")
	}
	testkit.WaitFor(t, 90*time.Second, "n5 back at its share after the drain was called off", func() bool {
		n := member("n5")
		return n.Replicas == 3 && !n.Draining
	})
	redirects()
	if code, out := cli("drain", "nobody"); code == 0 || !strings.Contains(out, "404") {
		t.Fatalf("drain of a stranger: %d %s", code, out)
	}
}
