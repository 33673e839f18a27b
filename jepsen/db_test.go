package jepsen

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/linkraft/linkraft/jepsen/checker"
	"github.com/linkraft/linkraft/jepsen/history"
	"github.com/linkraft/linkraft/jepsen/netns"
)

// helperReady is the line a "run" stand-in writes to its log once it
// handles SIGTERM: a SIGTERM before then kills it, as it would any process.
const helperReady = "stand-in ready"

// The test binary doubles as a stand-in node: JEPSEN_DB_HELPER=run waits
// for SIGTERM and exits 0; =exit3 exits with status 3 at once (a crash).
func TestMain(m *testing.M) {
	switch os.Getenv("JEPSEN_DB_HELPER") {
	case "run":
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM)
		fmt.Println(helperReady)
		<-ch
		os.Exit(0)
	case "exit3":
		os.Exit(3)
	case "crash":
		// A stand-in for a jepsencrash build: on SIGUSR2 it reads its
		// arming file; state-pending is "reached" at once, "exit3" makes
		// it fail another way while armed, anything else is never reached.
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGUSR2, syscall.SIGTERM)
		fmt.Println(helperReady)
		for sig := range ch {
			if sig == syscall.SIGTERM {
				os.Exit(0)
			}
			b, _ := os.ReadFile(os.Getenv("LINKRAFT_CRASH_ARM"))
			switch string(b) {
			case "state-pending":
				fmt.Fprintln(os.Stderr, "jepsen crash point state-pending reached: SIGKILL")
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			case "exit3":
				os.Exit(3)
			}
		}
	}
	os.Exit(m.Run())
}

// helperDB is a db of nodes standing in for linknode (this test binary in
// helper mode), in network namespaces named prefix on subnet (root only).
func helperDB(t *testing.T, prefix, subnet string, nodes int, mode string) *db {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces (CI runs as root)")
	}
	env, err := netns.New(netns.Config{Prefix: prefix, Nodes: nodes, Subnet: netip.MustParsePrefix(subnet)})
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Setup(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Teardown(context.Background()) })
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	d, err := newDB(env, self, t.TempDir(), nodes, nil, []string{"JEPSEN_DB_HELPER=" + mode}, history.NewRecorder(), staleBound)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.stop(5 * time.Second) })
	return d
}

// The process records the nodes checker reads: a nemesis kill, a pause seen
// in /proc, a crash nobody caused, a kill of the crashed node (an error of
// the fault, not a kill), a clean stop.
func TestProcessRecords(t *testing.T) {
	d := helperDB(t, "lkd", "10.80.0.0/24", 2, "run")
	n1, n2 := d.nodes[0], d.nodes[1]
	for _, n := range d.nodes {
		if err := d.start(n); err != nil {
			t.Fatal(err)
		}
	}
	// n2 is stopped cleanly at the end: not before it handles SIGTERM (a
	// test binary under -race on a loaded machine takes a while to start).
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(n2.logPath)
		if strings.Contains(string(b), helperReady) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stand-in n2 is not ready: %q", b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	effect, ok, err := d.pause(n1)
	if err != nil || !ok {
		t.Fatalf("pause: %q %v %v", effect, ok, err)
	}
	if err := d.resume(n1); err != nil {
		t.Fatal(err)
	}
	if effect, ok, err = d.kill(n1); err != nil || !ok || effect != "n1 killed by SIGKILL" {
		t.Fatalf("kill: %q %v %v", effect, ok, err)
	}
	// n1 restarts as a process that crashes at once.
	d.envv = []string{"JEPSEN_DB_HELPER=exit3"}
	if err := d.start(n1); err != nil {
		t.Fatal(err)
	}
	n1.mu.Lock()
	done := n1.done
	n1.mu.Unlock()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the crashing process did not end")
	}
	if _, _, err := d.kill(n1); !errors.Is(err, errNotRunning) {
		t.Fatalf("kill of a crashed node: %v, want errNotRunning", err)
	}
	if _, _, err := d.pause(n1); !errors.Is(err, errNotRunning) {
		t.Fatalf("pause of a crashed node: %v, want errNotRunning", err)
	}
	// A restart that cannot exec the binary: ip-netns-exec fails, and the
	// process ends on its own, which is on record too.
	d.bin = filepath.Join(t.TempDir(), "no-such-linknode")
	if err := d.restore(); err != nil {
		t.Fatal(err)
	}
	n1.mu.Lock()
	done = n1.done
	n1.mu.Unlock()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the failed start did not end")
	}
	d.stop(5 * time.Second)
	runs := d.runs()
	if len(runs) != 4 || runs[3].Node != n2.id {
		t.Fatalf("runs: %+v", runs)
	}
	want := []struct {
		cause, signal string
		code          int
		exited        bool
		startErr      bool
	}{
		{checker.CauseNemesis, "killed", -1, true, false}, // n1 #1
		{"", "", 3, true, false},                          // n1 #2: crashed
		{"", "", 1, true, false},                          // n1 #3: could not exec
		{checker.CauseStop, "", 0, true, false},           // n2 #1: stopped cleanly
	}
	for i, w := range want {
		r := runs[i]
		if r.Cause != w.cause || r.Signal != w.signal || r.ExitCode != w.code || r.Exited != w.exited || (r.StartError != "") != w.startErr {
			t.Errorf("run %d: %+v, want %+v", i, r, w)
		}
	}
	res := checker.CheckNodes(runs)
	if res.Valid != checker.Invalid || res.AnomalyCount != 2 || res.Anomalies[0].Kind != "unexpected-exit" {
		t.Fatalf("nodes checker: %+v", res)
	}
}

func TestClientSendsTheKey(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Authorization")
		w.WriteHeader(http.StatusNotFound)
	}))
	defer srv.Close()
	c := newClient(time.Second, 1, "lrk_the-run-key")
	c.read(context.Background(), srv.URL, "some-code")
	if a := <-got; a != "Bearer lrk_the-run-key" {
		t.Fatalf("Authorization %q", a)
	}
}

// TestReplacedNodesKeepTheirNames: a replaced node runs under a new
// linknode ID (n2-r1, then n2-r2), and the checkers' view maps every ID it
// ran under back to its address's node; an ID no node ran under stays.
func TestReplacedNodesKeepTheirNames(t *testing.T) {
	d := &db{}
	for i := range 3 {
		d.nodes = append(d.nodes, &dbNode{index: i, id: fmt.Sprintf("n%d", i+1)})
	}
	n2 := d.nodes[1]
	if n2.nodeID() != "n2" || d.nameOf("n2-r1") != "n2-r1" {
		t.Fatalf("before a replacement: %s, %s", n2.nodeID(), d.nameOf("n2-r1"))
	}
	n2.gen.Add(1)
	n2.gen.Add(1)
	if n2.nodeID() != "n2-r2" {
		t.Fatalf("after two replacements the node runs as %s", n2.nodeID())
	}
	for id, want := range map[string]string{"n2": "n2", "n2-r1": "n2", "n2-r2": "n2", "n2-r3": "n2-r3", "n1": "n1", "n3-r1": "n3-r1"} {
		if got := d.nameOf(id); got != want {
			t.Errorf("nameOf(%s) = %s, want %s", id, got, want)
		}
	}
}

// TestCrashPointRecords: a node that crashes at its armed point is the
// nemesis's kill; one that does not reach the point is disarmed and runs
// on; one that fails another way while armed is an unexpected exit.
func TestCrashPointRecords(t *testing.T) {
	d := helperDB(t, "lkc", "10.81.0.0/24", 1, "crash")
	d.crashPoints = true
	n := d.nodes[0]
	start := func() {
		t.Helper()
		if err := d.start(n); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			b, _ := os.ReadFile(n.logPath)
			if strings.Count(string(b), helperReady) == len(d.runs()) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the stand-in is not ready: %q", b)
			}
		}
	}
	start()
	if effect, ok, err := d.crashAt(n, "log-stored", 300*time.Millisecond); err != nil || ok || !strings.Contains(effect, "did not reach") {
		t.Fatalf("a point never reached: %q %v %v", effect, ok, err)
	}
	if effect, ok, err := d.crashAt(n, "state-pending", 10*time.Second); err != nil || !ok || effect != "n1 crashed at state-pending" {
		t.Fatalf("a point reached: %q %v %v", effect, ok, err)
	}
	start()
	if effect, ok, err := d.crashAt(n, "exit3", 10*time.Second); err != nil || ok || !strings.Contains(effect, "exit status 3") {
		t.Fatalf("a failure while armed: %q %v %v", effect, ok, err)
	}
	runs := d.runs()
	if len(runs) != 2 || runs[0].Cause != checker.CauseNemesis || runs[0].Signal != "killed" || runs[1].Cause != "" || runs[1].ExitCode != 3 {
		t.Fatalf("runs: %+v", runs)
	}
	if kills := nemesisKills(runs); len(kills["n1"]) != 1 {
		t.Fatalf("kills %v", kills)
	}
	if res := checker.CheckNodes(runs); res.Valid != checker.Invalid || res.AnomalyCount != 1 || res.Anomalies[0].Kind != "unexpected-exit" {
		t.Fatalf("nodes checker: %+v", res)
	}
}
