package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linkraft/linkraft/internal/testcluster"
)

// TestThreeProcessCluster forms a cluster of three real linknode processes
// with the documented flags, writes through one node, reads through the
// others, kills the node leading most shards with SIGKILL, keeps writing
// through the survivors, and restarts the killed node on its data.
func TestThreeProcessCluster(t *testing.T) {
	const size = 3
	addrs := make([]procAddrs, size)
	var gossips []string
	for i := range addrs {
		addrs[i] = procAddrs{http: freeAddr(t), raft: freeAddr(t), gossip: freeAddr(t)}
		gossips = append(gossips, addrs[i].gossip)
	}
	dirs := make([]string, size)
	keyFile := testKeyFile(t)
	flags := func(i int) []string {
		return []string{"-node-id", fmt.Sprintf("n%d", i+1), "-bootstrap-expect", "3", "-join", strings.Join(gossips, ","), "-shards", "4",
			"-cluster-key-file", keyFile}
	}
	procs := make([]*proc, size)
	for i := range procs {
		dirs[i] = t.TempDir()
		procs[i] = launchProc(t, dirs[i], addrs[i], flags(i)...)
	}
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Add(1)
		go func() { defer wg.Done(); p.waitReady(t) }()
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	var codes []string
	for i := 0; i < 30; i++ {
		status, m, _, err := call("POST", procs[i%size].base+"/api/v1/links", fmt.Sprintf(`{"url":"https://proc.example/%d"}`, i))
		if err != nil || status != 201 {
			t.Fatalf("create %d: %d %v %v", i, status, m, err)
		}
		code := m["code"].(string)
		codes = append(codes, code)
		for _, p := range procs { // read-your-writes on every node, no polling
			status, _, h, err := call("GET", p.base+"/"+code, "")
			if err != nil || status != 302 || h.Get("Location") != fmt.Sprintf("https://proc.example/%d", i) {
				t.Fatalf("redirect of %s on %s: %d %v", code, p.base, status, err)
			}
		}
	}
	_, st, _, err := call("GET", procs[0].admin+"/admin/v1/cluster", "")
	if err != nil {
		t.Fatal(err)
	}
	if nodes := st["nodes"].([]any); len(nodes) != size {
		t.Fatalf("cluster status lists %d nodes", len(nodes))
	}
	// The operator CLI against the live cluster: the admin listener, with
	// the admin key from LINKNODE_KEY.
	env := func(k string) (string, bool) {
		if k == "LINKNODE_KEY" {
			return testAdminKey, true
		}
		return "", false
	}
	var out, errOut strings.Builder
	if code := runCLI("shards", []string{"-addr", procs[1].admin}, env, &out, &errOut); code != 0 {
		t.Fatalf("linknode shards: %d %s", code, errOut.String())
	}
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 5 || !strings.HasPrefix(lines[0], "SHARD") {
		t.Fatalf("linknode shards printed:\n%s", out.String())
	}
	// Without a key, or against the public listener, it gets nowhere.
	if code := runCLI("shards", []string{"-addr", procs[1].admin, "-key", "lrk_not-a-key-of-this-cluster-at-all-0000"}, env, &out, &errOut); code == 0 {
		t.Fatal("linknode shards with a wrong key succeeded")
	}
	if code := runCLI("shards", []string{"-addr", procs[1].base}, env, &out, &errOut); code == 0 {
		t.Fatal("linknode shards against the public listener succeeded")
	}
	// Keys: made on one node, used on another, revoked on a third.
	out.Reset()
	if code := runCLI("keys", []string{"-addr", procs[0].admin, "-name", "ci", "-owner", "alice", "create"}, env, &out, &errOut); code != 0 {
		t.Fatalf("linknode keys create: %d %s", code, errOut.String())
	}
	secret := strings.TrimSpace(out.String())
	// Another node knows the key once it applies the meta entry: within a
	// second (milliseconds on loopback).
	testcluster.Eventually(t, time.Second, func() error {
		req, _ := http.NewRequest("POST", procs[1].base+"/api/v1/links", strings.NewReader(`{"url":"https://example.com/cli"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		switch resp.StatusCode {
		case 201:
			return nil
		case 401: // not applied on this node yet
			return fmt.Errorf("create with the CLI's key on another node: %d", resp.StatusCode)
		}
		t.Fatalf("create with the CLI's key on another node: %d", resp.StatusCode)
		return nil
	})
	out.Reset()
	if code := runCLI("keys", []string{"-addr", procs[2].admin, "list"}, env, &out, &errOut); code != 0 || !strings.Contains(out.String(), "alice") || strings.Contains(out.String(), secret) {
		t.Fatalf("linknode keys list: %d\n%s", code, out.String())
	}
	var id string
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[2] == "alice" {
			id = f[0]
		}
	}
	if code := runCLI("keys", []string{"-addr", procs[2].admin, "revoke", id}, env, &out, &errOut); code != 0 {
		t.Fatalf("linknode keys revoke %s: %d %s", id, code, errOut.String())
	}
	out.Reset()
	if code := runCLI("members", []string{"-addr", procs[2].admin, "-o", "json"}, env, &out, &errOut); code != 0 {
		t.Fatalf("linknode members: %d %s", code, errOut.String())
	}
	var members []map[string]any
	if err := json.Unmarshal([]byte(out.String()), &members); err != nil || len(members) != size {
		t.Fatalf("linknode members -o json: %v\n%s", err, out.String())
	}
	lead := map[string]int{}
	for _, s := range st["shards"].([]any) {
		sh := s.(map[string]any)
		if len(sh["replicas"].([]any)) != size {
			t.Fatalf("shard %v is not on every node", sh)
		}
		lead[sh["leader"].(string)]++
	}
	victim, most := 0, -1
	for i := range procs {
		if n := lead[fmt.Sprintf("n%d", i+1)]; n > most {
			victim, most = i, n
		}
	}
	procs[victim].kill(t)
	survivor := procs[(victim+1)%size]
	start := time.Now()
	for i := 0; i < 10; i++ {
		testcluster.Eventually(t, 20*time.Second, func() error {
			status, m, _, err := call("POST", survivor.base+"/api/v1/links", fmt.Sprintf(`{"url":"https://after-kill.example/%d"}`, i))
			if err != nil || status != 201 {
				return fmt.Errorf("write %d after the kill: %d %v", i, status, err)
			}
			codes = append(codes, m["code"].(string))
			return nil
		})
	}
	t.Logf("node n%d (leader of %d shards) killed; 10 writes accepted %v later", victim+1, most, time.Since(start).Round(time.Millisecond))

	procs[victim] = startProc(t, dirs[victim], addrs[victim], flags(victim)...)
	for _, p := range procs {
		for _, code := range codes {
			// While the restarted node rejoins, leadership may move (the
			// balancer hands it its share): a consistent read may then
			// answer 503, which the contract says to retry. Anything else
			// but the link fails at once.
			testcluster.Eventually(t, 20*time.Second, func() error {
				status, _, _, err := call("GET", p.base+"/api/v1/links/"+code+"?consistent=true", "")
				if err == nil && status != 200 && status != 503 {
					t.Fatalf("%s on %s after restart: %d", code, p.base, status)
				}
				if err != nil || status != 200 {
					return fmt.Errorf("%s on %s after restart: %d %v", code, p.base, status, err)
				}
				return nil
			})
		}
	}
}
