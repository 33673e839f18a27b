package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v4"
)

// containerArgs rewrites a command line written for a container to this
// machine: listen addresses to the test's loopback ports, the volume paths
// to temporary directories, the service names of -join and -advertise-host
// to loopback. Nothing else is changed, so a flag the file gets wrong
// fails here as it would in the container.
func containerArgs(args []string, a procAddrs, dirs map[string]string, gossipOf map[string]string) []string {
	out := append([]string(nil), args...)
	for i := 1; i < len(out); i++ {
		switch out[i-1] {
		case "-http-addr":
			out[i] = a.http
		case "-admin-addr":
			out[i] = a.admin
		case "-raft-addr":
			out[i] = a.raft
		case "-gossip-addr":
			out[i] = a.gossip
		case "-advertise-host":
			out[i] = "127.0.0.1"
		case "-join":
			var peers []string
			for _, p := range strings.Split(out[i], ",") {
				peers = append(peers, gossipOf[strings.Split(p, ":")[0]])
			}
			out[i] = strings.Join(peers, ",")
		}
		for from, to := range dirs {
			if out[i] == from || strings.HasPrefix(out[i], from+"/") {
				out[i] = to + strings.TrimPrefix(out[i], from)
			}
		}
	}
	return out
}

// TestComposeClusterCommandLines runs compose.yaml's services as compose
// would, without a container engine (none runs on this machine): keygen
// twice (the second keeps the keys), then the three nodes with their
// command lines, which must form a cluster that creates and redirects, and
// the operator command the file's comment gives.
func TestComposeClusterCommandLines(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("..", "..", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Services map[string]struct {
			Command []string `yaml:"command"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	keys := t.TempDir()
	dirs := map[string]string{"/keys": keys}
	run := func(args ...string) {
		out, err := exec.Command(binary(t), args...).CombinedOutput()
		if err != nil {
			t.Fatalf("linknode %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	keygen := containerArgs(doc.Services["keygen"].Command, procAddrs{}, dirs, nil)
	if len(keygen) == 0 || keygen[0] != "keygen" {
		t.Fatalf("the keygen service's command: %q", keygen)
	}
	run(keygen...)
	first, err := os.ReadFile(filepath.Join(keys, "cluster.key"))
	if err != nil {
		t.Fatal(err)
	}
	run(keygen...) // compose runs it on every up
	if again, _ := os.ReadFile(filepath.Join(keys, "cluster.key")); string(again) != string(first) {
		t.Fatal("a second keygen run replaced the cluster key")
	}

	names := []string{"n1", "n2", "n3"}
	addrs := map[string]procAddrs{}
	gossipOf := map[string]string{}
	for _, n := range names {
		addrs[n] = newAddrs(t)
		gossipOf[n] = addrs[n].gossip
	}
	rawKey, err := os.ReadFile(filepath.Join(keys, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	adminKey := strings.TrimSpace(string(rawKey))
	procs := map[string]*proc{}
	var wg sync.WaitGroup
	for _, n := range names {
		cmd := doc.Services[n].Command
		if len(cmd) == 0 {
			t.Fatalf("service %s has no command", n)
		}
		dirs := map[string]string{"/keys": keys, "/data": t.TempDir()}
		// launchBin's own flags come first; the file's, rewritten, follow
		// and win.
		p := launchBin(t, binary(t), nil, dirs["/data"], addrs[n], containerArgs(cmd, addrs[n], dirs, gossipOf)...)
		procs[n] = p
		wg.Go(func() { p.waitReadyAs(t, adminKey) })
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	st, m, _, err := callAs(adminKey, "POST", procs["n1"].base+"/api/v1/links", `{"url":"https://compose.example/x"}`)
	if err != nil || st != 201 {
		t.Fatalf("create through n1: %d %v %v", st, m, err)
	}
	code := m["code"].(string)
	for _, n := range names {
		st, _, h, err := call("GET", procs[n].base+"/"+code, "")
		if err != nil || st != 302 || h.Get("Location") != "https://compose.example/x" {
			t.Fatalf("redirect on %s: %d %v", n, st, err)
		}
	}
	var out, errOut strings.Builder
	if rc := runCLI("status", []string{"-addr", procs["n1"].admin, "-key", adminKey}, noEnv, &out, &errOut); rc != 0 {
		t.Fatalf("status with the generated admin key: %d %s %s", rc, out.String(), errOut.String())
	}
	for _, n := range names {
		if !strings.Contains(out.String(), n) {
			t.Errorf("status does not list %s:\n%s", n, out.String())
		}
	}
}

// TestDockerfileCommandLines runs the Dockerfile's CMD as the image would
// (ENTRYPOINT /linknode, the volume at /data) and its HEALTHCHECK command:
// the check fails before the node is up and passes once it is ready.
func TestDockerfileCommandLines(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var cmd, health []string
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "CMD "); ok {
			if err := json.Unmarshal([]byte(rest), &cmd); err != nil {
				t.Fatalf("CMD: %v", err)
			}
		}
		if strings.HasPrefix(line, "HEALTHCHECK ") {
			_, rest, ok := strings.Cut(line, " CMD ")
			if !ok || json.Unmarshal([]byte(rest), &health) != nil {
				t.Fatalf("HEALTHCHECK: %q", line)
			}
		}
		if rest, ok := strings.CutPrefix(line, "ENTRYPOINT "); ok && strings.TrimSpace(rest) != `["/linknode"]` {
			t.Fatalf("ENTRYPOINT: %q", rest)
		}
	}
	if len(cmd) == 0 || len(health) < 2 || health[0] != "/linknode" {
		t.Fatalf("CMD %q, HEALTHCHECK %q", cmd, health)
	}
	a := newAddrs(t)
	probe := func() error {
		args := append([]string(nil), health[1:]...)
		for i := 1; i < len(args); i++ {
			if args[i-1] == "-url" {
				args[i] = strings.Replace(args[i], "127.0.0.1:8080", a.http, 1)
			}
		}
		out, err := exec.Command(binary(t), args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	if err := probe(); err == nil {
		t.Fatal("the health check passed with no node running")
	}
	data := t.TempDir()
	p := launchBin(t, binary(t), []string{"LINKNODE_ADMIN_KEY=" + testAdminKey}, data, a, containerArgs(cmd, a, map[string]string{"/data": data}, nil)...)
	p.waitReady(t)
	if err := probe(); err != nil {
		t.Fatalf("the health check fails on a ready node: %v", err)
	}
}
