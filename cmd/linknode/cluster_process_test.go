package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linkraft/linkraft/internal/testkit"
)

// TestThreeProcessCluster forms a cluster of three real linknode processes
// with the documented flags, writes through one node, reads through the
// others, kills the node leading most shards with SIGKILL, keeps writing
// through the survivors, and restarts the killed node on its data.
func TestThreeProcessCluster(t *testing.T) {
	t.Parallel()
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
	testkit.Eventually(t, time.Second, func() error {
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
	// Keys are read from the node's own replica of the meta group (Keys'
	// contract): the third node lists the key once it has applied it.
	testkit.Eventually(t, 20*time.Second, func() error {
		out.Reset()
		if code := runCLI("keys", []string{"-addr", procs[2].admin, "list"}, env, &out, &errOut); code != 0 || !strings.Contains(out.String(), "alice") {
			return fmt.Errorf("linknode keys list: %d\n%s", code, out.String())
		}
		return nil
	})
	if strings.Contains(out.String(), secret) {
		t.Fatalf("linknode keys list shows the secret:\n%s", out.String())
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
	linkFeatures(t, procs, env)
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
		testkit.Eventually(t, 20*time.Second, func() error {
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
			testkit.Eventually(t, 20*time.Second, func() error {
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

// linkFeatures runs issue 16's features against the built binary on the
// three processes: each made through one node and used through the others.
func linkFeatures(t *testing.T, procs []*proc, env func(string) (string, bool)) {
	t.Helper()
	send := func(method, url, ctype, body string, hdr ...string) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	auth := "Bearer " + testAdminKey
	// A password link, unlocked through another node.
	if st, _, b := send("POST", procs[0].base+"/api/v1/links", "application/json", `{"url":"https://proc.example/vault","alias":"proc-vault","password":"open sesame"}`, "Authorization", auth); st != 201 {
		t.Fatalf("password link: %d %s", st, b)
	}
	testkit.Eventually(t, 10*time.Second, func() error {
		if st, _, _ := send("GET", procs[2].base+"/proc-vault", "", ""); st != 200 {
			return fmt.Errorf("the password page on n3: %d", st)
		}
		return nil
	})
	if st, _, _ := send("POST", procs[1].base+"/proc-vault", "application/x-www-form-urlencoded", "password=wrong"); st != 403 {
		t.Fatalf("a wrong password on n2: %d", st)
	}
	if st, h, _ := send("POST", procs[2].base+"/proc-vault", "application/x-www-form-urlencoded", "password=open+sesame"); st != 303 || h.Get("Location") != "https://proc.example/vault" {
		t.Fatalf("the right password on n3: %d %v", st, h)
	}
	// Rules, read on another node.
	if st, _, b := send("POST", procs[1].base+"/api/v1/links", "application/json", `{"url":"https://proc.example/app","alias":"proc-app","rules":[{"language":"fr","url":"https://proc.example/fr"}]}`, "Authorization", auth); st != 201 {
		t.Fatalf("rules: %d %s", st, b)
	}
	testkit.Eventually(t, 10*time.Second, func() error {
		if st, h, _ := send("GET", procs[0].base+"/proc-app", "", "", "Accept-Language", "fr-FR"); st != 302 || h.Get("Location") != "https://proc.example/fr" {
			return fmt.Errorf("rules on n1: %d %v", st, h)
		}
		return nil
	})
	// The most clicked first: browser visits through n2, counted by each
	// node's analytics, listed through n3.
	const browser = "Mozilla/5.0 (X11; Linux x86_64; rv:130.0) Gecko/20100101 Firefox/130.0"
	for range 3 {
		if st, _, _ := send("GET", procs[1].base+"/proc-app", "", "", "User-Agent", browser); st != 302 {
			t.Fatalf("a visit of proc-app on n2: %d", st)
		}
	}
	testkit.Eventually(t, 20*time.Second, func() error {
		st, _, b := send("GET", procs[2].base+"/api/v1/links?sort=-clicks&limit=1", "", "", "Authorization", auth)
		var m struct {
			Links []struct {
				Code   string `json:"code"`
				Clicks uint64 `json:"clicks"`
			} `json:"links"`
		}
		if st != 200 || json.Unmarshal([]byte(b), &m) != nil || len(m.Links) != 1 || m.Links[0].Code != "proc-app" || m.Links[0].Clicks < 3 {
			return fmt.Errorf("the most clicked link on n3: %d %s", st, b)
		}
		return nil
	})
	// An Idempotency-Key retried through another node.
	body := `{"url":"https://proc.example/once"}`
	st1, _, b1 := send("POST", procs[0].base+"/api/v1/links", "application/json", body, "Authorization", auth, "Idempotency-Key", "proc-key-1")
	st2, h2, b2 := send("POST", procs[2].base+"/api/v1/links", "application/json", body, "Authorization", auth, "Idempotency-Key", "proc-key-1")
	var l1, l2 map[string]any
	_ = json.Unmarshal([]byte(b1), &l1)
	_ = json.Unmarshal([]byte(b2), &l2)
	if st1 != 201 || st2 != 201 || l1["code"] != l2["code"] || h2.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("idempotent create: %d %s, then %d %v %s", st1, b1, st2, h2, b2)
	}
	// Query forwarding, the preview, the QR code, through another node.
	if st, _, b := send("POST", procs[0].base+"/api/v1/links", "application/json", `{"url":"https://proc.example/q?a=1","alias":"proc-query","title":"Docs","tags":["tour"]}`, "Authorization", auth); st != 201 {
		t.Fatalf("create: %d %s", st, b)
	}
	testkit.Eventually(t, 10*time.Second, func() error {
		if st, h, _ := send("GET", procs[1].base+"/proc-query?utm_source=mail&a=2", "", ""); st != 302 || h.Get("Location") != "https://proc.example/q?a=1&utm_source=mail" {
			return fmt.Errorf("query forwarding on n2: %d %v", st, h)
		}
		return nil
	})
	if st, h, b := send("GET", procs[2].base+"/proc-query+", "", ""); st != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/html") || !strings.Contains(b, "https://proc.example/q?a=1") {
		t.Fatalf("preview on n3: %d %v", st, h)
	}
	if st, h, b := send("GET", procs[2].base+"/proc-query/qr?format=png&size=128", "", ""); st != 200 || h.Get("Content-Type") != "image/png" || !strings.HasPrefix(b, "\x89PNG") {
		t.Fatalf("QR on n3: %d %v", st, h)
	}
	// Listing, tags, bulk update and delete, each through another node
	// (a listing reads every shard on its leader: 503 while one moves).
	listed := func(base, query string) (map[string]any, error) {
		st, _, b := send("GET", base+"/api/v1/links?"+query, "", "", "Authorization", auth)
		var m map[string]any
		if st != 200 || json.Unmarshal([]byte(b), &m) != nil {
			return nil, fmt.Errorf("listing %s on %s: %d %s", query, base, st, b)
		}
		return m, nil
	}
	testkit.Eventually(t, 20*time.Second, func() error {
		m, err := listed(procs[1].base, "tag=tour&owner=admin")
		if err != nil {
			return err
		}
		if links := m["links"].([]any); len(links) != 1 || links[0].(map[string]any)["code"] != "proc-query" {
			return fmt.Errorf("tagged listing: %v", m)
		}
		return nil
	})
	if st, _, b := send("GET", procs[2].base+"/api/v1/tags", "", "", "Authorization", auth); st != 200 || !strings.Contains(b, `{"tag":"tour","links":1}`) {
		t.Fatalf("tags on n3: %d %s", st, b)
	}
	if st, _, b := send("POST", procs[0].base+"/api/v1/links/bulk-update", "application/json", `{"filter":{"tag":"tour"},"patch":{"title":"Renamed"}}`, "Authorization", auth); st != 200 || !strings.Contains(b, `"updated":1`) {
		t.Fatalf("bulk update on n1: %d %s", st, b)
	}
	if st, _, b := send("POST", procs[1].base+"/api/v1/links/bulk-delete", "application/json", `{"codes":["proc-query"]}`, "Authorization", auth); st != 200 || !strings.Contains(b, `"deleted":1`) {
		t.Fatalf("bulk delete on n2: %d %s", st, b)
	}
	if st, _, _ := send("GET", procs[2].base+"/api/v1/links/proc-query?consistent=true", "", "", "Authorization", auth); st != 410 {
		t.Fatalf("the deleted link on n3: %d", st)
	}
	// linknode import through n2, linknode export through n3.
	dir := t.TempDir()
	in := filepath.Join(dir, "shlink.csv")
	csv := "\"createdAt\",\"domain\",\"shortCode\",\"shortUrl\",\"longUrl\",\"title\",\"tags\",\"visits\"\n" +
		"\"2016-08-21T20:34:16+02:00\",\"s.test\",\"imp-one\",\"https://s.test/imp-one\",\"https://proc.example/imp1\",\"One\",\"moved|proc\",3\n" +
		"\"2016-08-21T20:34:16+02:00\",\"s.test\",\"imp-two\",\"https://s.test/imp-two\",\"https://proc.example/imp2\",\"\",\"moved\",0\n"
	if err := os.WriteFile(in, []byte(csv), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut strings.Builder
	if code := runTransfer("import", []string{"-url", procs[1].base, "-q", in}, env, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "(shlink-csv): 2 rows, 2 created, 0 failed") {
		t.Fatalf("linknode import: %d %s %s", code, out.String(), errOut.String())
	}
	exported := filepath.Join(dir, "links.ndjson")
	out.Reset()
	testkit.Eventually(t, 10*time.Second, func() error {
		if st, _, _ := send("GET", procs[2].base+"/imp-two", "", ""); st != 302 {
			return fmt.Errorf("imp-two on n3: %d", st)
		}
		return nil
	})
	// A listing reads every shard on its leader: while the balancer moves
	// one it answers 503, which says to retry.
	testkit.Eventually(t, 20*time.Second, func() error {
		out.Reset()
		errOut.Reset()
		if code := runTransfer("export", []string{"-url", procs[2].base, "-q", "-o", exported}, env, &out, &errOut); code != 0 {
			if !strings.Contains(errOut.String(), "503") {
				t.Fatalf("linknode export: %d %s", code, errOut.String())
			}
			return fmt.Errorf("linknode export: %s", errOut.String())
		}
		return nil
	})
	b, err := os.ReadFile(exported)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Count(string(b), "\n")
	if !strings.Contains(out.String(), fmt.Sprintf("exported %d links to %s", lines, exported)) ||
		!strings.Contains(string(b), `"code":"imp-one"`) || strings.Contains(string(b), "open sesame") || strings.Contains(string(b), "argon2") {
		t.Fatalf("linknode export: %s\n%s", out.String(), b)
	}
}
