package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeWalkthrough runs README's "Using it" block top to bottom
// against a real node, as written but for the addresses (the node's
// loopback ports for localhost:8080 and 127.0.0.1:8081) and the built
// binary for `go run ./cmd/linknode`, in a folder laid out as after the
// README's first command (linknode-data/admin.key). Every command must
// succeed (bash -e, pipefail), no answer may be a 5xx or no answer, and
// the answers the comments promise must come.
func TestReadmeWalkthrough(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("the walkthrough needs curl (.ci/run installs it)")
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "\n## Using it\n\n```sh\n")
	block, _, ok2 := strings.Cut(rest, "\n```\n")
	if !ok || !ok2 {
		t.Fatal("README has no sh block under ## Using it")
	}
	p := startProc(t, t.TempDir(), newAddrs(t), "-shards", "4")
	script := strings.NewReplacer("http://localhost:8080", p.base, "http://127.0.0.1:8081", p.admin,
		"go run ./cmd/linknode", binary(t)).Replace(block)
	work := t.TempDir()
	if err := os.MkdirAll(filepath.Join(work, "linknode-data"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "linknode-data", "admin.key"), []byte(testAdminKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// curl as written, also saying on stderr what each request was answered.
	prelude := "set -euo pipefail\ncurl() { command curl -w '%{stderr}HTTP %{http_code} %{method} %{url_effective}\\n' \"$@\"; }\n"
	cmd := exec.Command("bash", "-c", prelude+script)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "LINKRAFT_KEY="+testAdminKey)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the walkthrough stopped: %v\nstderr:\n%s\nstdout:\n%s", err, stderr.String(), stdout.String())
	}
	type answer struct{ code, method, path string }
	var answers []answer
	for line := range strings.Lines(stderr.String()) {
		f := strings.Fields(line)
		if len(f) != 4 || f[0] != "HTTP" {
			continue
		}
		path := strings.TrimPrefix(strings.TrimPrefix(f[3], p.base), p.admin)
		answers = append(answers, answer{f[1], f[2], path})
		if f[1] == "000" || f[1] >= "500" {
			t.Errorf("%s %s answered %s", f[2], f[3], f[1])
		}
	}
	if calls := strings.Count(script, "curl -"); len(answers) < calls {
		t.Errorf("%d curl calls in the walkthrough, %d answers:\n%s", calls, len(answers), stderr.String())
	}
	first := func(method, path string) string {
		for _, a := range answers {
			if a.method == method && a.path == path {
				return a.code
			}
		}
		return "none"
	}
	for _, want := range []struct{ method, path, code string }{
		{"POST", "/api/v1/links", "201"},
		{"GET", "/docs", "301"},
		{"GET", "/app", "302"},
		{"POST", "/vault", "303"},
		{"GET", "/docs+", "200"},
		{"GET", "/docs/qr?size=512", "200"},
		{"POST", "/api/v1/links/import", "200"},
		{"DELETE", "/api/v1/links/docs", "204"},
		{"POST", "/api/v1/links/bulk", "200"},
		{"GET", "/api/v1/openapi.json", "200"},
		{"GET", "/metrics", "200"},
		{"GET", "/admin/v1/cluster", "200"},
	} {
		if got := first(want.method, want.path); got != want.code {
			t.Errorf("%s %s: %s, want %s", want.method, want.path, got, want.code)
		}
	}
	for _, a := range answers {
		if a.method == "DELETE" && strings.HasPrefix(a.path, "/api/v1/keys/") && (a.code != "204" || a.path == "/api/v1/keys/") {
			t.Errorf("the key's revocation: %s %s", a.path, a.code)
		}
	}
	if !strings.Contains(stdout.String(), "linknode") {
		t.Errorf("linknode version said: %q", stdout.String())
	}
}
