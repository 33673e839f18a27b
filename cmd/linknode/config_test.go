package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/linkraft/linkraft/internal/clusterkey"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestFlagsEnvAndDefaults(t *testing.T) {
	t.Parallel()
	c, err := ParseFlags(nil, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	// A single node keeps its peer and gossip ports on loopback.
	if c.HTTPAddr != ":8080" || c.RaftAddr != "127.0.0.1:7000" || c.GossipAddr != "127.0.0.1:7946" || c.DataDir != "linknode-data" ||
		c.Shards != 8 || c.Replicas != 3 || c.BootstrapExpect != 1 || c.CodeMode != "permuted" || c.ShutdownTimeout != 10*time.Second ||
		c.RenderRateLimit != "5/s" {
		t.Fatalf("defaults = %+v", c)
	}
	// Environment over defaults, flags over environment.
	c, err = ParseFlags([]string{"-http-addr", "127.0.0.1:9000"}, env(map[string]string{
		"LINKNODE_HTTP_ADDR": ":1111", "LINKNODE_SHARDS": "16", "LINKNODE_CODE_MODE": "sequential", "LINKNODE_PUBLIC_URL": "https://sho.rt",
	}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != "127.0.0.1:9000" || c.Shards != 16 || c.CodeMode != "sequential" || c.PublicURL != "https://sho.rt" {
		t.Fatalf("env/flag precedence = %+v", c)
	}
	// A node of a multi-node cluster listens on every interface, and the
	// key may come from the environment.
	key, _ := clusterkey.Generate()
	c, err = ParseFlags([]string{"-join", "10.0.0.1:7946"}, env(map[string]string{"LINKNODE_CLUSTER_KEY": key.String()}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.RaftAddr != ":7000" || c.GossipAddr != ":7946" || c.ClusterKey != key.String() {
		t.Fatalf("multi-node defaults = %+v", c)
	}
	// The trust boundary's flags.
	c, err = ParseFlags([]string{"-trusted-proxies", "10.0.0.0/8, 192.0.2.7,fd00::/8", "-cors-origins", "https://app.example,http://localhost:3000",
		"-rate-limit", "20/m", "-anonymous-create"}, env(map[string]string{"LINKNODE_ADMIN_KEY": " " + strings.Repeat("k", 40) + "\n"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.TrustedProxies) != 3 || c.TrustedProxies[1].String() != "192.0.2.7/32" || len(c.CORSOrigins) != 2 || !c.AnonymousCreate ||
		c.AdminKey != strings.Repeat("k", 40) || c.AdminAddr != "127.0.0.1:8081" {
		t.Fatalf("trust flags = %+v", c)
	}
	for in, want := range map[string][2]float64{"50/s": {50, 100}, "10/m": {10.0 / 60, 10}, "0": {-1, 0}} {
		r, err := ParseRate(in)
		if err != nil || r.PerSecond != want[0] || float64(r.Burst) != want[1] {
			t.Errorf("ParseRate(%q) = %+v, %v", in, r, err)
		}
	}
}

func TestFlagErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{args: []string{"-shards", "x"}, want: "invalid value"},
		{env: map[string]string{"LINKNODE_SHARDS": "many"}, want: "LINKNODE_SHARDS"},
		{args: []string{"-bootstrap-expect", "0"}, want: "-bootstrap-expect"},
		{args: []string{"-bootstrap-expect", "100"}, want: "-bootstrap-expect 100: must be 1 to 64"},
		{args: []string{"-shards", "0"}, want: "-shards 0: must be 1 to 256"},
		{args: []string{"-shards", "300"}, want: "-shards 300"},
		{args: []string{"-replicas", "9"}, want: "-replicas 9: must be 1 to 7"},
		{args: []string{"-code-mode", "bogus"}, want: `-code-mode "bogus": want permuted or sequential`},
		{args: []string{"-feature-level", "99"}, want: "-feature-level 99"},
		{args: []string{"-node-id", "bad id"}, want: `-node-id "bad id"`},
		{args: []string{"-http-addr", "8080"}, want: "-http-addr"},
		{args: []string{"-log-format", "xml"}, want: "-log-format"},
		{args: []string{"-log-level", "loud"}, want: "-log-level"},
		{args: []string{"-raft-trailing-logs", "0"}, want: "-raft-trailing-logs"},
		{args: []string{"-raft-snapshot-interval", "1ns"}, want: "-raft-snapshot-interval"},
		{args: []string{"-raft-trailing-bytes", "0"}, want: "-raft-trailing-bytes must be between 64 KiB and 1 GiB, or -1"},
		{args: []string{"-raft-trailing-bytes", "-2"}, want: "-raft-trailing-bytes must be between 64 KiB and 1 GiB, or -1"},
		{args: []string{"-state-commit-interval", "-1s"}, want: "-state-commit-interval must be between 0 and 1m"},
		{args: []string{"-state-commit-interval", "2h"}, want: "-state-commit-interval must be between 0 and 1m"},
		{args: []string{"-raft-log-segment-bytes", "4096"}, want: "-raft-log-segment-bytes must be between 64 KiB and 1 GiB"},
		{args: []string{"-raft-log-segment-bytes", "4294967296"}, want: "-raft-log-segment-bytes must be between 64 KiB and 1 GiB"},
		{args: []string{"extra"}, want: "unexpected argument"},
		// Secure by default: no multi-node cluster without a key.
		{args: []string{"-bootstrap-expect", "3"}, want: "linknode keygen"},
		{args: []string{"-join", "10.0.0.1:7946"}, want: "-cluster-key-file"},
		{env: map[string]string{"LINKNODE_CLUSTER_KEY": "short"}, want: "LINKNODE_CLUSTER_KEY"},
		{args: []string{"-cluster-key-file", "k", "-insecure"}, want: "contradict"},
		{args: []string{"-cluster-key-file", "k"}, env: map[string]string{"LINKNODE_CLUSTER_KEY": "x"}, want: "not both"},
		{args: []string{"-peer-tls-ca", "ca.pem"}, want: "go together"},
		{args: []string{"-gossip-key", "abc"}, want: "not defined"},
		{args: []string{"-pprof-addr", "127.0.0.1:6060"}, want: "not defined"},
		// An unknown flag names the closest defined one.
		{args: []string{"-htp-addr", ":9000"}, want: "did you mean -http-addr?"},
		{args: []string{"-reap", "1m"}, want: "did you mean -reap-after?"},
		{args: []string{"-zzzzzz"}, want: "lists every flag"},
		{args: []string{"-rate-limit", "fast"}, want: "-rate-limit"},
		{args: []string{"-rate-limit", "50/h"}, want: "-rate-limit"},
		{args: []string{"-anonymous-rate-limit", "-1/m"}, want: "-anonymous-rate-limit"},
		{args: []string{"-redirect-rate-limit", "10"}, want: "-redirect-rate-limit"},
		{args: []string{"-render-rate-limit", "fast"}, want: "-render-rate-limit"},
		{args: []string{"-trusted-proxies", "10.0.0.0/33"}, want: "-trusted-proxies"},
		{args: []string{"-trusted-proxies", "proxy.example"}, want: "-trusted-proxies"},
		{args: []string{"-tls-cert", "c.pem"}, want: "go together"},
		{args: []string{"-admin-addr", "8081"}, want: "-admin-addr"},
		{env: map[string]string{"LINKNODE_ADMIN_KEY": "short"}, want: "LINKNODE_ADMIN_KEY"},
		{args: []string{"-admin-key-file", "k"}, env: map[string]string{"LINKNODE_ADMIN_KEY": strings.Repeat("k", 40)}, want: "not both"},
	} {
		_, err := ParseFlags(tc.args, env(tc.env), io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseFlags(%v, %v) = %v, want an error mentioning %q", tc.args, tc.env, err, tc.want)
		}
	}
}

// TestSubcommandFlagSuggestion: a subcommand's unknown flag is refused
// with exit 2, naming the closest of its flags.
func TestSubcommandFlagSuggestion(t *testing.T) {
	t.Parallel()
	var out, errOut strings.Builder
	if code := runCLI("keys", []string{"-nme", "x", "list"}, env(nil), &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "did you mean -name?") {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	errOut.Reset()
	if code := runCLI("drain", []string{"-cancl", "n3"}, env(nil), &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "did you mean -cancel?") {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
}

func TestKeygen(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	if code := run([]string{"keygen"}, &out, &errOut); code != 0 {
		t.Fatalf("keygen: %d %s", code, errOut.String())
	}
	if _, err := clusterkey.Parse(out.String()); err != nil {
		t.Fatalf("keygen printed %q: %v", out.String(), err)
	}
	p := filepath.Join(t.TempDir(), "cluster.key")
	if code := run([]string{"keygen", "-o", p}, io.Discard, io.Discard); code != 0 {
		t.Fatalf("keygen -o: %d", code)
	}
	if _, err := clusterkey.Load(p); err != nil {
		t.Fatal(err)
	}
	if code := run([]string{"keygen", "-o", p}, io.Discard, io.Discard); code == 0 {
		t.Fatal("keygen -o overwrote a key file")
	}
	// A keyless multi-node start is refused before anything is made.
	dir := filepath.Join(t.TempDir(), "data")
	errOut.Reset()
	if code := run([]string{"-bootstrap-expect", "3", "-data-dir", dir}, io.Discard, &errOut); code != 2 || !strings.Contains(errOut.String(), "linknode keygen") {
		t.Fatalf("keyless multi-node start: exit %d, %s", code, errOut.String())
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused start made its data dir: %v", err)
	}
}

func TestRepairShardArguments(t *testing.T) {
	t.Parallel()
	var errOut bytes.Buffer
	if code := run([]string{"repair-shard", "-data-dir", t.TempDir(), "x"}, io.Discard, &errOut); code != 1 || !strings.Contains(errOut.String(), "meta or a shard number") {
		t.Fatalf("repair-shard x: %d %s", code, errOut.String())
	}
	errOut.Reset()
	if code := run([]string{"repair-shard", "-data-dir", t.TempDir(), "3"}, io.Discard, &errOut); code != 1 || !strings.Contains(errOut.String(), "no such file") {
		t.Fatalf("repair-shard of a missing group: %d %s", code, errOut.String())
	}
	if code := run([]string{"repair-shard"}, io.Discard, io.Discard); code != 2 {
		t.Fatalf("repair-shard without a group: %d", code)
	}
}

func TestVersionSubcommand(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if code := run([]string{"version"}, &out, io.Discard); code != 0 || !strings.HasPrefix(out.String(), "linknode ") {
		t.Fatalf("version: %d %q", code, out.String())
	}
	if code := run([]string{"-shards", "nope"}, io.Discard, io.Discard); code != 2 {
		t.Fatalf("bad flag exit code %d, want 2", code)
	}
}

// TestHelpNamesEveryCommandAndHExitsZero: linknode help (and -h) name
// every subcommand, each of which answers -h with its flags and exit 0
// (none starts a node or calls one), and an unknown flag exits 2.
func TestHelpNamesEveryCommandAndHExitsZero(t *testing.T) {
	t.Parallel()
	var out, errOut strings.Builder
	if code := run([]string{"help"}, &out, &errOut); code != 0 {
		t.Fatalf("linknode help: %d", code)
	}
	help := out.String()
	out.Reset()
	if code := run([]string{"-h"}, &out, &errOut); code != 0 || !strings.Contains(errOut.String(), "backup -o FILE") || !strings.Contains(errOut.String(), "-bootstrap-expect") {
		t.Fatalf("linknode -h: %d\n%s", code, errOut.String())
	}
	for _, g := range commandGroups {
		for _, c := range g.commands {
			name := strings.Fields(c[0])[0]
			if !strings.Contains(help, c[0]) {
				t.Errorf("help lacks %q", c[0])
			}
			if name == "help" || name == "version" {
				continue
			}
			errOut.Reset()
			if code := run([]string{name, "-h"}, &out, &errOut); code != 0 || !strings.Contains(errOut.String(), "Usage of linknode "+name) {
				t.Errorf("linknode %s -h: %d %q", name, code, errOut.String())
			}
			if code := run([]string{name, "-no-such-flag"}, &out, &errOut); code != 2 {
				t.Errorf("linknode %s -no-such-flag: %d", name, code)
			}
		}
	}
}

// TestFlagsAfterWords: a subcommand takes its flags before or after its
// words; after "--" everything is a word.
func TestFlagsAfterWords(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args  []string
		name  string
		words []string
	}{
		{[]string{"create", "-name", "N", "-owner", "O"}, "N", []string{"create"}},
		{[]string{"-name", "N", "create"}, "N", []string{"create"}},
		{[]string{"revoke", "-name", "N", "abc"}, "N", []string{"revoke", "abc"}},
		{[]string{"-name", "N", "--", "x", "-owner", "y"}, "N", []string{"x", "-owner", "y"}},
		{[]string{"-"}, "", []string{"-"}},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		name := fs.String("name", "", "")
		fs.String("owner", "", "")
		if code, done := parseArgs(fs, c.args); done {
			t.Fatalf("%q: ended with %d", c.args, code)
		}
		if *name != c.name || !slices.Equal(fs.Args(), c.words) {
			t.Errorf("%q: name %q, words %q; want %q, %q", c.args, *name, fs.Args(), c.name, c.words)
		}
	}
}

// TestBashCompletion: the bash script, sourced by bash, completes the
// subcommands and completion's shells.
func TestBashCompletion(t *testing.T) {
	t.Parallel()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal("bash is needed to run the completion it writes")
	}
	var script, errOut strings.Builder
	if code := runCompletion([]string{"bash"}, &script, &errOut); code != 0 {
		t.Fatalf("completion bash: %d %s", code, errOut.String())
	}
	file := filepath.Join(t.TempDir(), "linknode.bash")
	if err := os.WriteFile(file, []byte(script.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bash, "-c", `source "$1"
COMP_WORDS=(linknode re); COMP_CWORD=1; _linknode; echo "${COMPREPLY[*]}"
COMP_WORDS=(linknode completion f); COMP_CWORD=2; _linknode; echo "${COMPREPLY[*]}"`, "bash", file).CombinedOutput()
	if err != nil || string(out) != "remove restore repair-shard recover\nfish\n" {
		t.Fatalf("bash completion: %q %v", out, err)
	}
	if code := runCompletion([]string{"tcsh"}, &script, &errOut); code != 2 {
		t.Fatalf("completion tcsh: %d", code)
	}
}

// TestLoopbackOnly: the -public-url warning is for listeners other
// machines can reach.
func TestLoopbackOnly(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "[::1]:8080": true, "127.0.0.9:80": true,
		"0.0.0.0:8080": false, "[::]:8080": false, "10.0.0.1:8080": false, "bad": false,
	} {
		if got := loopbackOnly(addr); got != want {
			t.Errorf("loopbackOnly(%q) = %v", addr, got)
		}
	}
}

// TestDataDirLock: a second node on a data dir is refused at once, naming
// the dir and the holder; once the first lets go, the dir is free. (A
// second node used to fail after bbolt's open timeout with advice to run
// repair-shard.)
func TestDataDirLock(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	first, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockDataDir(dir); err == nil || !strings.Contains(err.Error(), "-data-dir "+dir+" is in use by another linknode (pid ") {
		t.Fatalf("a second lock: %v", err)
	}
	first.unlock()
	again, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	again.unlock()
	if _, err := lockDataDir(filepath.Join(dir, lockName, "x")); err == nil || !strings.Contains(err.Error(), "-data-dir") {
		t.Fatalf("a data dir under a file: %v", err)
	}
}

// TestConfigFile: -config reads flag values from TOML or YAML, under the
// environment and the command line (flag > environment > file > default),
// and refuses a file's mistakes naming the file, the key and the fix.
func TestConfigFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tomlFile := write("linknode.toml", `# a node of three
http-addr = "127.0.0.1:9090"
shards = 16
replicas = 2
join = ["10.0.0.1:7946", "10.0.0.2:7946"]
insecure = true
shutdown-timeout = "20s"
analytics = false
public-url = "https://sho.rt"
`)
	yamlFile := write("linknode.yaml", `http-addr: "127.0.0.1:9090"
shards: 16
replicas: 2
join: ["10.0.0.1:7946", "10.0.0.2:7946"]
insecure: true
shutdown-timeout: 20s
analytics: false
public-url: https://sho.rt
`)
	for _, path := range []string{tomlFile, yamlFile} {
		c, err := ParseFlags([]string{"-config", path, "-replicas", "5"}, env(map[string]string{"LINKNODE_SHARDS": "32"}), io.Discard)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		// The file over defaults, the environment over the file, the
		// command line over both.
		if c.HTTPAddr != "127.0.0.1:9090" || c.Shards != 32 || c.Replicas != 5 || !slices.Equal(c.Join, []string{"10.0.0.1:7946", "10.0.0.2:7946"}) ||
			!c.Insecure || c.ShutdownTimeout != 20*time.Second || c.Analytics || c.PublicURL != "https://sho.rt" || c.RaftAddr != ":7000" {
			t.Fatalf("%s: %+v", path, c)
		}
		// LINKNODE_CONFIG names the file when -config does not.
		c, err = ParseFlags(nil, env(map[string]string{"LINKNODE_CONFIG": path}), io.Discard)
		if err != nil || c.Shards != 16 || c.Replicas != 2 {
			t.Fatalf("LINKNODE_CONFIG=%s: %+v, %v", path, c, err)
		}
	}
	for _, tc := range []struct{ name, body, want string }{
		{"typo.toml", `htp-addr = ":1"`, `unknown key "htp-addr", did you mean http-addr?`},
		{"secret.toml", `cluster-key = "abc"`, "secrets stay out of config files"},
		{"nested.toml", "config = \"other.toml\"", "cannot name another"},
		{"table.toml", "[shards]\ncount = 1", "not map"},
		{"unknown-table.toml", "[raft]\nsnapshot = 1", `unknown key "raft"`},
		{"syntax.toml", "shards = ", "line 1"},
		{"dup.toml", "shards = 1\nshards = 2", "shards"},
		{"list.yaml", "shards: [1, 2]", "takes one value, not a list"},
		{"null.yaml", "public-url:", "has no value"},
		{"seq.yaml", "- http-addr", "want a mapping"},
		{"dup.yaml", "shards: 1\nshards: 2", "already defined"},
		{"badvalue.yaml", "shards: many", `shards = "many"`},
		{"duration.toml", "shutdown-timeout = 20", `want a duration such as "10s"`},
		{"invalid.toml", `http-addr = "8080"`, "-http-addr is set by file"},
		{"config.json", `{}`, "name a .toml, .yaml or .yml file"},
		{"huge.toml", "# " + strings.Repeat("x", maxConfigFile), "larger than"},
	} {
		p := write(tc.name, tc.body)
		_, err := ParseFlags([]string{"-config", p}, env(nil), io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%s: %v, want an error naming the file and mentioning %q", tc.name, err, tc.want)
		}
	}
	if _, err := ParseFlags([]string{"-config", filepath.Join(dir, "missing.toml")}, env(nil), io.Discard); err == nil || !strings.Contains(err.Error(), "missing.toml") {
		t.Errorf("a missing file: %v", err)
	}
	// A value from the environment that fails names the variable, even
	// with a file.
	if _, err := ParseFlags([]string{"-config", tomlFile}, env(map[string]string{"LINKNODE_HTTP_ADDR": "9000"}), io.Discard); err == nil ||
		!strings.Contains(err.Error(), "LINKNODE_HTTP_ADDR") {
		t.Errorf("a bad environment value under a file: %v", err)
	}
}

// TestConfigPrint: linknode config print shows each flag's value and its
// source, and its TOML form is a config file that gives the same node.
func TestConfigPrint(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "linknode.toml")
	if err := os.WriteFile(path, []byte("shards = 16\njoin = [\"10.0.0.1:7946\"]\ninsecure = true\nrate-limit = \"20/m\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	lookup := env(map[string]string{"LINKNODE_REPLICAS": "2", "LINKNODE_ADMIN_KEY": strings.Repeat("s", 40)})
	var out, errOut strings.Builder
	if code := runConfig([]string{"print", "-config", path, "-http-addr", "127.0.0.1:9999"}, lookup, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range [][]string{
		{"shards", "16", "file " + path},
		{"replicas", "2", "env LINKNODE_REPLICAS"},
		{"http-addr", "127.0.0.1:9999", "flag"},
		{"data-dir", "linknode-data", "default"},
		{"raft-addr", ":7000", "default"},
		{"LINKNODE_ADMIN_KEY", "(set,", "not"},
	} {
		found := false
		for _, line := range strings.Split(out.String(), "\n") {
			if f := strings.Fields(line); len(f) >= 3 && f[0] == want[0] && f[1] == want[1] && strings.Contains(line, want[2]) {
				found = true
			}
		}
		if !found {
			t.Errorf("config print has no line %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), strings.Repeat("s", 40)) {
		t.Error("config print shows the admin key")
	}
	// Its TOML is a config file for the same node.
	out.Reset()
	if code := runConfig([]string{"print", "-format", "toml", "-config", path, "-http-addr", "127.0.0.1:9999"}, lookup, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	again := filepath.Join(dir, "printed.toml")
	if err := os.WriteFile(again, []byte(out.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	want, err := ParseFlags([]string{"-config", path, "-http-addr", "127.0.0.1:9999"}, lookup, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseFlags([]string{"-config", again}, env(map[string]string{"LINKNODE_ADMIN_KEY": strings.Repeat("s", 40)}), io.Discard)
	if err != nil {
		t.Fatalf("the printed TOML:\n%s\n%v", out.String(), err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the printed TOML gives\n%+v\nwant\n%+v", got, want)
	}
	// A configuration the node would refuse exits 1 and says why.
	errOut.Reset()
	if code := runConfig([]string{"print", "-shards", "x"}, env(nil), io.Discard, &errOut); code != 2 {
		t.Errorf("a bad flag: exit %d", code)
	}
	errOut.Reset()
	if code := runConfig([]string{"print", "-bootstrap-expect", "3"}, env(nil), io.Discard, &errOut); code != 1 || !strings.Contains(errOut.String(), "would not start") {
		t.Errorf("a refused configuration: exit %d, %q", code, errOut.String())
	}
	if code := runConfig([]string{"show"}, env(nil), io.Discard, io.Discard); code != 2 {
		t.Errorf("config show: exit %d", code)
	}
}

// TestReadmeConfigFile: README's sample config file is one the node takes,
// with the values it shows.
func TestReadmeConfigFile(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "\n### A config file\n")
	_, rest, ok2 := strings.Cut(rest, "```toml\n")
	sample, _, ok3 := strings.Cut(rest, "```\n")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README has no toml block under ### A config file")
	}
	path := filepath.Join(t.TempDir(), "linknode.toml")
	if err := os.WriteFile(path, []byte(sample), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := ParseFlags([]string{"-config", path}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "/var/lib/linknode" || len(c.Join) != 3 || c.ClusterKeyFile != "/etc/linknode/cluster.key" || c.ShutdownTimeout != 20*time.Second {
		t.Fatalf("README's config file gives %+v", c)
	}
}
