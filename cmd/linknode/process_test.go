package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/internal/clusterkey"
	"github.com/linkraft/linkraft/internal/loopback"
	"github.com/linkraft/linkraft/internal/testkit"
)

// binDir holds the linknode binary, built by the first test that runs it
// (binary): tests of flags and handlers need no build.
var (
	binDir   string
	binOnce  sync.Once
	binPath  string
	binError error
)

// testAdminKey is the first admin key of every cluster the process tests
// start (LINKNODE_ADMIN_KEY); call sends it.
var testAdminKey string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "linknode-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	if testAdminKey, err = apikey.NewSecret(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// binary returns the linknode binary, building it on first use.
func binary(tb testing.TB) string {
	tb.Helper()
	binOnce.Do(func() {
		p := filepath.Join(binDir, "linknode")
		build := exec.Command("go", "build", "-o", p, ".")
		out, err := build.CombinedOutput()
		if err != nil {
			binError = fmt.Errorf("build linknode: %v\n%s", err, out)
			return
		}
		binPath = p
	})
	if binError != nil {
		tb.Fatal(binError)
	}
	return binPath
}

// freeAddr returns a loopback address for a child process (TCP and UDP
// free, below the kernel's ephemeral range so no outgoing connection takes
// it first).
func freeAddr(tb testing.TB) string { return loopback.Addr(tb) }

// proc is one linknode process on loopback ports.
type proc struct {
	cmd     *exec.Cmd
	base    string
	admin   string // the admin listener
	logPath string
	exited  chan struct{}
	waitErr error
}

type procAddrs struct{ http, raft, gossip, admin string }

func newAddrs(tb testing.TB) procAddrs {
	return procAddrs{http: freeAddr(tb), raft: freeAddr(tb), gossip: freeAddr(tb), admin: freeAddr(tb)}
}

// startProc starts linknode on dataDir and waits until /readyz says ready.
func startProc(tb testing.TB, dataDir string, a procAddrs, extra ...string) *proc {
	tb.Helper()
	p := launchProc(tb, dataDir, a, extra...)
	p.waitReady(tb)
	return p
}

// testKeyFile writes a new cluster key to a file and returns its path.
func testKeyFile(tb testing.TB) string {
	tb.Helper()
	k, err := clusterkey.Generate()
	if err != nil {
		tb.Fatal(err)
	}
	p := filepath.Join(tb.TempDir(), "cluster.key")
	if err := clusterkey.Save(p, k); err != nil {
		tb.Fatal(err)
	}
	return p
}

// launchProc starts linknode without waiting for it, with the test's
// admin key as LINKNODE_ADMIN_KEY.
func launchProc(tb testing.TB, dataDir string, a procAddrs, extra ...string) *proc {
	tb.Helper()
	return launchProcEnv(tb, []string{"LINKNODE_ADMIN_KEY=" + testAdminKey}, dataDir, a, extra...)
}

// launchProcEnv is launchProc with env added to the test's environment.
func launchProcEnv(tb testing.TB, env []string, dataDir string, a procAddrs, extra ...string) *proc {
	tb.Helper()
	return launchBin(tb, binary(tb), env, dataDir, a, extra...)
}

// launchBin is launchProcEnv with the linknode binary at bin.
func launchBin(tb testing.TB, bin string, env []string, dataDir string, a procAddrs, extra ...string) *proc {
	tb.Helper()
	logPath := filepath.Join(tb.TempDir(), "linknode.log")
	logf, err := os.Create(logPath)
	if err != nil {
		tb.Fatal(err)
	}
	if a.admin == "" {
		a.admin = freeAddr(tb)
	}
	args := append([]string{"-data-dir", dataDir, "-http-addr", a.http, "-raft-addr", a.raft,
		"-gossip-addr", a.gossip, "-admin-addr", a.admin, "-fast-raft", "-log-level", "info"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	p := &proc{cmd: cmd, base: "http://" + a.http, admin: "http://" + a.admin, logPath: logPath, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logf.Close()
		close(p.exited)
	}()
	tb.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = cmd.Process.Kill() // only the process this test started
			<-p.exited
		}
		if tb.Failed() {
			tb.Logf("log of linknode at %s:\n%s", p.base, p.logs())
		}
	})
	return p
}

// waitReady polls /readyz until it answers 200, then the key API until the
// node knows the test's admin key (the meta leader installs it).
func (p *proc) waitReady(tb testing.TB) {
	tb.Helper()
	p.waitReadyAs(tb, testAdminKey)
}

// waitReadyAs is waitReady for a node whose admin key is adminKey.
func (p *proc) waitReadyAs(tb testing.TB, adminKey string) {
	tb.Helper()
	ready := false
	testkit.Eventually(tb, 60*time.Second, func() error {
		select {
		case <-p.exited:
			tb.Fatalf("linknode exited during start: %v", p.waitErr)
		default:
		}
		if !ready {
			resp, err := http.Get(p.base + "/readyz")
			if err != nil {
				return fmt.Errorf("readyz: %w", err)
			}
			resp.Body.Close()
			if ready = resp.StatusCode == 200; !ready {
				return fmt.Errorf("readyz: %d", resp.StatusCode)
			}
		}
		if status, _, _, err := callAs(adminKey, "GET", p.base+"/api/v1/keys", ""); err != nil || status != 200 {
			return fmt.Errorf("ready, but the key API answers %d %v", status, err)
		}
		return nil
	})
}

func (p *proc) logs() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill(tb testing.TB) {
	tb.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		tb.Fatal(err)
	}
	<-p.exited
}

var client = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func call(method, url, body string) (int, map[string]any, http.Header, error) {
	return callAs(testAdminKey, method, url, body)
}

// callAs is call with another key.
func callAs(key, method, url, body string) (int, map[string]any, http.Header, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, resp.Header, err
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m, resp.Header, nil
}

// TestAcknowledgedWritesSurviveKill9 runs the real binary, writes through it
// from several clients, SIGKILLs it in the middle of the writes, restarts it
// on the same data and checks every acknowledged create and update. Three
// crash cycles; codes must never repeat across them.
func TestAcknowledgedWritesSurviveKill9(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	addrs := newAddrs(t)

	var mu sync.Mutex
	acked := map[string]expect{}
	allCodes := map[string]int{} // code → cycle that first saw it

	var firstKey clusterkey.Key
	for cycle := 0; cycle < 3; cycle++ {
		p := startProc(t, dataDir, addrs)
		// A single node with no key flags keeps its own key in the data
		// dir, private, and the same one across restarts.
		key, err := clusterkey.Load(filepath.Join(dataDir, "cluster.key"))
		if err != nil {
			t.Fatalf("the node's own cluster key: %v", err)
		}
		if cycle == 0 {
			firstKey = key
		} else if key != firstKey {
			t.Fatal("the node's cluster key changed across a restart")
		}
		// Everything acknowledged before must be there, exactly.
		mu.Lock()
		checkAcked(t, p, acked)
		mu.Unlock()

		var stop sync.WaitGroup
		var killed bool
		var nAcked int
		for w := 0; w < 8; w++ {
			stop.Add(1)
			go func() {
				defer stop.Done()
				for i := 0; i < 2000; i++ {
					url := fmt.Sprintf("https://example.com/c%d/w%d/%d", cycle, w, i)
					body := fmt.Sprintf(`{"url":%q}`, url)
					if i%5 == 0 {
						body = fmt.Sprintf(`{"url":%q,"alias":"a-%d-%d-%d"}`, url, cycle, w, i)
					}
					status, m, _, err := call("POST", p.base+"/api/v1/links", body)
					if err != nil || status != 201 {
						mu.Lock()
						k := killed
						mu.Unlock()
						if !k {
							t.Errorf("create before the kill failed: %d %v %v", status, m, err)
						}
						return
					}
					code := m["code"].(string)
					mu.Lock()
					if prev, dup := allCodes[code]; dup {
						t.Errorf("code %s issued again (first in cycle %d)", code, prev)
					}
					allCodes[code] = cycle
					acked[code] = expect{urls: []string{url}}
					nAcked++
					mu.Unlock()
					if i%3 == 0 {
						newURL := url + "?v=2"
						mu.Lock()
						acked[code] = expect{urls: []string{url, newURL}} // unknown until answered
						mu.Unlock()
						status, _, _, err := call("PATCH", p.base+"/api/v1/links/"+code, fmt.Sprintf(`{"url":%q}`, newURL))
						if err == nil && status == 200 {
							mu.Lock()
							acked[code] = expect{urls: []string{newURL}}
							mu.Unlock()
						}
					}
				}
			}()
		}
		// Kill once enough writes are acknowledged, with writers in flight.
		testkit.Eventually(t, 60*time.Second, func() error {
			mu.Lock()
			defer mu.Unlock()
			if nAcked < 150 {
				return fmt.Errorf("only %d writes acknowledged", nAcked)
			}
			return nil
		})
		mu.Lock()
		killed = true
		mu.Unlock()
		p.kill(t)
		stop.Wait()
		t.Logf("cycle %d: %d writes acknowledged before SIGKILL, %d in total", cycle, nAcked, len(acked))
	}
	p := startProc(t, dataDir, addrs)
	checkAcked(t, p, acked)
}

// expect is what a code may hold after a crash: the acknowledged URL, or
// either URL while an update's outcome is unknown.
type expect struct {
	urls []string
}

func checkAcked(t *testing.T, p *proc, acked map[string]expect) {
	t.Helper()
	for code, e := range acked {
		status, m, _, err := call("GET", p.base+"/api/v1/links/"+code+"?consistent=true", "")
		if err != nil || status != 200 {
			t.Fatalf("acknowledged %s lost: %d %v %v", code, status, m, err)
		}
		got := m["url"].(string)
		if !contains(e.urls, got) {
			t.Fatalf("%s has url %s, want one of %v", code, got, e.urls)
		}
		status, _, h, err := call("GET", p.base+"/"+code, "")
		if err != nil || status != 302 || h.Get("Location") != got {
			t.Fatalf("redirect of %s: %d %v %v", code, status, h, err)
		}
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// TestSIGTERMDrainsAndExits: a clean stop within the shutdown budget, exit
// status 0, data intact on restart; and the raft metrics bridge works in the
// real process.
func TestSIGTERMDrainsAndExits(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	addrs := newAddrs(t)
	p := startProc(t, dataDir, addrs)
	status, m, _, err := call("POST", p.base+"/api/v1/links", `{"url":"https://example.com/term","alias":"term-test"}`)
	if err != nil || status != 201 {
		t.Fatalf("create: %d %v %v", status, m, err)
	}
	if status, _, _, err := call("GET", p.base+"/term-test", ""); err != nil || status != 302 {
		t.Fatalf("redirect: %d %v", status, err)
	}
	resp, err := http.Get(p.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metricsBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"linkraft_raft_", "linkraft_redirect_duration_seconds", "linkraft_apply_duration_seconds"} {
		if !bytes.Contains(metricsBody, []byte(want)) {
			t.Errorf("/metrics of the process lacks %s", want)
		}
	}
	// The shared Raft log has committed (the create, the groups' votes).
	if !regexp.MustCompile(`(?m)^linkraft_raft_log_commits_total [1-9]`).Match(metricsBody) {
		t.Errorf("/metrics of the process shows no commit of the shared Raft log")
	}
	if !regexp.MustCompile(`(?m)^linkraft_raft_log_segments [1-9]`).Match(metricsBody) ||
		!regexp.MustCompile(`(?m)^linkraft_raft_log_bytes [1-9]`).Match(metricsBody) {
		t.Errorf("/metrics of the process shows no segment of the shared Raft log")
	}

	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("still running 10s after SIGTERM\n%s", p.logs())
	}
	if p.waitErr != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", p.waitErr, p.logs())
	}
	t.Logf("stopped %v after SIGTERM", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(p.logs(), "msg=stopped") {
		t.Fatalf("no clean-stop log line\n%s", p.logs())
	}
	p = startProc(t, dataDir, addrs)
	status, m, h, err := call("GET", p.base+"/term-test", "")
	if err != nil || status != 302 || h.Get("Location") != "https://example.com/term" {
		t.Fatalf("after restart: %d %v %v", status, m, err)
	}
}
