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
