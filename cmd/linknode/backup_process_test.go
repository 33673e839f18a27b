package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBackupAndRestoreCommands: linknode backup writes a running node's
// cluster to a file (checked on the way, renamed into place when whole);
// linknode restore refuses a cut copy before sending anything and puts
// the whole file into another node, which then redirects every link.
func TestBackupAndRestoreCommands(t *testing.T) {
	t.Parallel()
	env := func(k string) (string, bool) {
		if k == "LINKNODE_KEY" {
			return testAdminKey, true
		}
		return "", false
	}
	a := startProc(t, filepath.Join(t.TempDir(), "a"), newAddrs(t))
	for i := range 5 {
		if st, m, _, err := call("POST", a.base+"/api/v1/links", fmt.Sprintf(`{"url":"https://backup.example/%d","alias":"bk-%d"}`, i, i)); err != nil || st != 201 {
			t.Fatalf("create: %d %v %v", st, m, err)
		}
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "cluster.lrbk")
	var out, errOut strings.Builder
	if code := runBackup("backup", []string{"-addr", a.admin, "-q", "-o", file}, env, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "5 links (tombstones included)") {
		t.Fatalf("linknode backup: %d %s %s", code, out.String(), errOut.String())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("beside the backup: %v", entries)
	}
	whole, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "cut.lrbk")
	if err := os.WriteFile(cut, whole[:len(whole)-20], 0o600); err != nil {
		t.Fatal(err)
	}

	b := startProc(t, filepath.Join(t.TempDir(), "b"), newAddrs(t))
	out.Reset()
	errOut.Reset()
	if code := runBackup("restore", []string{"-addr", b.admin, "-q", cut}, env, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "is not a whole backup; nothing was sent") || !strings.Contains(errOut.String(), "truncated") {
		t.Fatalf("linknode restore of a cut file: %d %s", code, errOut.String())
	}
	if code := runBackup("restore", []string{"-addr", b.admin, "-q", file}, env, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "restored 5 links (0 were there already)") {
		t.Fatalf("linknode restore: %d %s %s", code, out.String(), errOut.String())
	}
	for i := range 5 {
		if st, _, h, err := call("GET", fmt.Sprintf("%s/bk-%d", b.base, i), ""); err != nil || st != 302 || h.Get("Location") != fmt.Sprintf("https://backup.example/%d", i) {
			t.Fatalf("bk-%d on the restored node: %d %v %v", i, st, h, err)
		}
	}
}
