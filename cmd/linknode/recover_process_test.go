package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRecoverCommand: linknode recover changes nothing unless the operator
// types "recover", refuses a -peers without the node itself, and rewrites
// the stopped node's groups when confirmed; the node then starts and
// serves what it had.
func TestRecoverCommand(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	addrs := newAddrs(t)
	p := startProc(t, dir, addrs)
	if st, m, _, err := call("POST", p.base+"/api/v1/links", `{"url":"https://recover.example/","alias":"kept"}`); err != nil || st != 201 {
		t.Fatalf("create: %d %v %v", st, m, err)
	}
	p.kill(t)
	b, err := os.ReadFile(filepath.Join(dir, "node-id"))
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(string(b))

	var out, errOut strings.Builder
	if code := runRecover([]string{"-data-dir", dir, "-peers", id}, strings.NewReader("yes\n"), &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "not confirmed; nothing was changed") || !strings.Contains(errOut.String(), "lost for good") {
		t.Fatalf("unconfirmed: %d %s", code, errOut.String())
	}
	errOut.Reset()
	if code := runRecover([]string{"-data-dir", dir, "-peers", "someone-else", "-yes"}, nil, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "not among the nodes to keep") {
		t.Fatalf("without itself: %d %s", code, errOut.String())
	}
	out.Reset()
	if code := runRecover([]string{"-data-dir", dir, "-peers", id}, strings.NewReader("recover\n"), &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), fmt.Sprintf("meta: now %s", id)) || !strings.Contains(out.String(), "linknode remove ID") {
		t.Fatalf("recover: %d %s %s", code, out.String(), errOut.String())
	}
	p = startProc(t, dir, addrs)
	if st, _, h, err := call("GET", p.base+"/kept", ""); err != nil || st != 302 || h.Get("Location") != "https://recover.example/" {
		t.Fatalf("kept after recovery: %d %v %v", st, h, err)
	}
}

// TestRepairOfASoleReplicaServesAgain: on a single node, repair-shard sets
// the shard's whole group aside (refusing the meta group: nothing to
// catch up from), the node starts serving again with that shard empty,
// and a backup restored with -resume brings its links back.
func TestRepairOfASoleReplicaServesAgain(t *testing.T) {
	t.Parallel()
	env := func(k string) (string, bool) {
		if k == "LINKNODE_KEY" {
			return testAdminKey, true
		}
		return "", false
	}
	dir := filepath.Join(t.TempDir(), "data")
	addrs := newAddrs(t)
	p := startProc(t, dir, addrs)
	for i := range 24 {
		if st, m, _, err := call("POST", p.base+"/api/v1/links", fmt.Sprintf(`{"url":"https://sole.example/%d","alias":"sole-%d"}`, i, i)); err != nil || st != 201 {
			t.Fatalf("create: %d %v %v", st, m, err)
		}
	}
	// The shard to lose: one that holds some of them.
	victim := ""
	_, st, _, err := call("GET", p.admin+"/admin/v1/cluster", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range st["shards"].([]any) {
		if m := sh.(map[string]any); m["links"] != nil && m["links"].(float64) > 0 {
			victim = m["id"].(string)
			break
		}
	}
	if victim == "" {
		t.Fatalf("no shard holds a link: %v", st)
	}
	file := filepath.Join(t.TempDir(), "backup.lrbk")
	var out, errOut strings.Builder
	if code := runBackup("backup", []string{"-addr", strings.TrimPrefix(p.admin, "http://"), "-q", "-o", file}, env, &out, &errOut); code != 0 {
		t.Fatalf("backup: %d %s", code, errOut.String())
	}
	p.kill(t)
	if code := runRepair([]string{"-data-dir", dir, "meta"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "meta group's only replica") {
		t.Fatalf("repair of the sole meta replica: %d %s", code, errOut.String())
	}
	out.Reset()
	if code := runRepair([]string{"-data-dir", dir, victim}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "had no other replica") {
		t.Fatalf("repair-shard %s: %d %s %s", victim, code, out.String(), errOut.String())
	}
	p = startProc(t, dir, addrs) // ready: every group has a leader
	missing := 0
	for i := range 24 {
		if st, _, _, err := call("GET", fmt.Sprintf("%s/sole-%d", p.base, i), ""); err == nil && st == 404 {
			missing++
		}
	}
	if missing == 0 || missing == 24 {
		t.Fatalf("%d of 24 links gone after shard %s was reset", missing, victim)
	}
	if st, m, _, err := call("POST", p.base+"/api/v1/links", `{"url":"https://sole.example/new"}`); err != nil || st != 201 {
		t.Fatalf("create after the repair: %d %v %v", st, m, err)
	}
	out.Reset()
	if code := runBackup("restore", []string{"-addr", strings.TrimPrefix(p.admin, "http://"), "-q", "-resume", file}, env, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), fmt.Sprintf("restored %d links (%d were there already)", missing, 24-missing)) {
		t.Fatalf("restore -resume: %d %s %s", code, out.String(), errOut.String())
	}
	for i := range 24 {
		if st, _, h, err := call("GET", fmt.Sprintf("%s/sole-%d", p.base, i), ""); err != nil || st != 302 || h.Get("Location") != fmt.Sprintf("https://sole.example/%d", i) {
			t.Fatalf("sole-%d after the restore: %d %v %v", i, st, h, err)
		}
	}
}
