package jepsen

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/internal/clusterkey"
	"github.com/linkraft/linkraft/internal/crashpoint"
	"github.com/linkraft/linkraft/jepsen/checker"
	"github.com/linkraft/linkraft/jepsen/history"
	"github.com/linkraft/linkraft/jepsen/lazyfs"
	"github.com/linkraft/linkraft/jepsen/netns"
)

// Ports every node listens on, on its own address.
const (
	httpPort   = 8080
	adminPort  = 8081
	raftPort   = 7000
	gossipPort = 7946
)

// nodeState is what has become of a node's process.
type nodeState int

const (
	running nodeState = iota
	killed            // by the nemesis
	paused            // by the nemesis
	crashed           // ended when nobody ended it
	stopped           // by the harness, at the end
)

// errNotRunning is returned when a fault aims at a node whose process is
// not running (it died on its own, or is already down).
var errNotRunning = errors.New("not running")

// dbNode is one linknode process.
type dbNode struct {
	index   int
	id      string
	ip      string
	dir     string // node folder in the store: log, data/
	logPath string

	// gen counts the times the node was replaced (replace-node): its
	// linknode node ID is id, then id-r1, id-r2, …
	gen atomic.Int32

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{} // closed when cmd has exited and its run is recorded
	state  nodeState
	expect string // why the running process will end (checker.Cause*), "" if nobody ends it
	runs   []checker.NodeRun
}

// nodeID is the -node-id the node runs with now.
func (n *dbNode) nodeID() string {
	if g := n.gen.Load(); g > 0 {
		return fmt.Sprintf("%s-r%d", n.id, g)
	}
	return n.id
}

// nameOf is the harness's name of the node that ran with linknode node ID
// id (itself, or a replacement's id-rK), or id if no node did.
func (d *db) nameOf(id string) string {
	for _, n := range d.nodes {
		for g := range n.gen.Load() + 1 {
			if id == n.id || id == fmt.Sprintf("%s-r%d", n.id, g) {
				return n.id
			}
		}
	}
	return id
}

// HTTP is the node's base URL.
func (n *dbNode) HTTP() string { return "http://" + net.JoinHostPort(n.ip, strconv.Itoa(httpPort)) }

// Admin is the node's admin listener (/admin/v1, /metrics).
func (n *dbNode) Admin() string { return "http://" + net.JoinHostPort(n.ip, strconv.Itoa(adminPort)) }

// pid is the running process's PID, or 0.
func (n *dbNode) pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// db is the cluster of linknode processes.
type db struct {
	env   *netns.Env
	bin   string
	nodes []*dbNode
	extra []string // extra linknode flags
	envv  []string // extra environment (bug switches)
	rec   *history.Recorder
	// staleBound is the -remote-cache-ttl the nodes run with.
	staleBound time.Duration
	// keyFile is the cluster key every node runs with (made per run):
	// the harness tests the cluster as shipped, with mutual TLS on the
	// peer port and encrypted gossip.
	keyFile string
	// adminKeyFile holds the first admin API key (made per run, installed
	// through -admin-key-file); the harness's client sends adminKey.
	adminKeyFile, adminKey string
	// smallDisk is the tmpfs of the disk-full node's data dir, if mounted
	// (disk.go).
	smallDisk string
	// lazy are the nodes' data dirs on lazyfs, in node order, when the run
	// has the power-loss fault (power.go).
	lazy []*lazyfs.FS
	// expect is the nodes' -bootstrap-expect.
	expect int
	// crashPoints: the nodes are jepsencrash builds, each given its
	// arming file (crash.go).
	crashPoints bool
}

func newDB(env *netns.Env, bin, storeDir string, n int, extra, envv []string, rec *history.Recorder, staleBound time.Duration) (*db, error) {
	d := &db{env: env, bin: bin, extra: extra, envv: envv, rec: rec, staleBound: staleBound, keyFile: filepath.Join(storeDir, "cluster.key"), expect: n}
	key, err := clusterkey.Generate()
	if err != nil {
		return nil, err
	}
	if err := clusterkey.Save(d.keyFile, key); err != nil {
		return nil, fmt.Errorf("cluster key: %w", err)
	}
	if d.adminKey, err = apikey.NewSecret(); err != nil {
		return nil, err
	}
	d.adminKeyFile = filepath.Join(storeDir, "admin.key")
	if err := apikey.SaveSecret(d.adminKeyFile, d.adminKey); err != nil {
		return nil, fmt.Errorf("admin key: %w", err)
	}
	for i := range n {
		id := fmt.Sprintf("n%d", i+1)
		dir := filepath.Join(storeDir, "nodes", id)
		d.nodes = append(d.nodes, &dbNode{index: i, id: id, ip: env.NodeIP(i).String(), dir: dir, logPath: filepath.Join(dir, "log")})
	}
	return d, nil
}

// harnessFlags are the linknode flags the harness sets itself: -node-args
// may not name them (the checkers depend on their values).
var harnessFlags = []string{"node-id", "data-dir", "http-addr", "raft-addr", "gossip-addr", "join",
	"bootstrap-expect", "public-url", "code-mode", "remote-cache-ttl", "click-flush", "analytics", "fast-redirect",
	"shutdown-timeout", "cluster-key-file", "insecure", "admin-addr", "admin-key-file", "rate-limit"}

// shutdownTimeout is the linknode -shutdown-timeout the harness runs with,
// and stopGrace how long it waits after SIGTERM before it calls a stop hung.
// linknode's default budget is 10 s; the harness allows 30, because its
// nodes share two cores with the clients, the checkers and, in CI, other
// packages' tests (one CI run saw three nodes pass 10 s; see JEPSEN.md). The
// nodes checker counts stops over 10 s apart.
const (
	shutdownTimeout = 30 * time.Second
	stopGrace       = shutdownTimeout + 5*time.Second
)

func (d *db) args(n *dbNode) []string {
	var join []string
	for _, o := range d.nodes {
		join = append(join, net.JoinHostPort(o.ip, strconv.Itoa(gossipPort)))
	}
	args := []string{
		"-node-id", n.nodeID(),
		"-data-dir", filepath.Join(n.dir, "data"),
		"-http-addr", net.JoinHostPort(n.ip, strconv.Itoa(httpPort)),
		"-raft-addr", net.JoinHostPort(n.ip, strconv.Itoa(raftPort)),
		"-gossip-addr", net.JoinHostPort(n.ip, strconv.Itoa(gossipPort)),
		"-join", strings.Join(join, ","),
		"-bootstrap-expect", strconv.Itoa(d.expect),
		"-public-url", n.HTTP(),
		// Sequential codes let the unique-ids checker map a code back to
		// its ID and the lease it came from; the permutation is a
		// bijection, so uniqueness is the same property either way.
		"-code-mode", "sequential",
		// The bounds the converge and counter checkers hold the nodes to.
		"-remote-cache-ttl", d.staleBound.String(),
		"-click-flush", clickFlush.String(),
		"-analytics=true", "-fast-redirect=true",
		"-shutdown-timeout", shutdownTimeout.String(),
		"-cluster-key-file", d.keyFile,
		"-admin-addr", net.JoinHostPort(n.ip, strconv.Itoa(adminPort)),
		"-admin-key-file", d.adminKeyFile,
	}
	return append(args, d.extra...)
}

// wipe empties node n's data dir (n stopped): the disk of a new machine.
// The dir itself stays, as it may be a mount (lazyfs, the disk-full tmpfs).
func (d *db) wipe(n *dbNode) error {
	dir := filepath.Join(n.dir, "data")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// start launches node n (first start or restart on the same data dir) and
// records the run; a process that will not start is recorded too.
func (d *db) start(n *dbNode) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return fmt.Errorf("%s is already running", n.id)
	}
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	run := checker.NodeRun{Node: n.id, Run: len(n.runs) + 1, Started: d.rec.Now()}
	fmt.Fprintf(logf, "=== jepsen: start #%d of %s at %s\n", run.Run, n.id, time.Now().UTC().Format(time.RFC3339Nano))
	cmd := d.env.Command(n.index, d.bin, d.args(n)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), d.envv...)
	if d.crashPoints {
		cmd.Env = append(cmd.Env, crashpoint.Env+"="+n.crashArm())
	}
	// Its own process group: a Ctrl-C to the harness does not reach the
	// nodes before the harness has recorded what it needs.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		run.StartError = err.Error()
		n.runs = append(n.runs, run)
		n.state = crashed
		return fmt.Errorf("start %s: %w", n.id, err)
	}
	run.PID = cmd.Process.Pid
	n.runs = append(n.runs, run)
	i := len(n.runs) - 1
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		d.ended(n, i, cmd.ProcessState)
		close(done)
	}()
	n.cmd, n.done, n.state, n.expect = cmd, done, running, ""
	return nil
}

// ended records how run i of n ended.
func (d *db) ended(n *dbNode, i int, ps *os.ProcessState) {
	n.mu.Lock()
	defer n.mu.Unlock()
	r := &n.runs[i]
	r.Exited, r.Ended, r.Cause = true, d.rec.Now(), n.expect
	r.ExitCode = ps.ExitCode()
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		r.Signal = ws.Signal().String()
	}
	n.cmd = nil
	if n.expect == "" {
		n.state = crashed
		r.LastLog = lastLines(n.logPath, 5)
	}
	n.expect = ""
}

// lastLines returns the last k lines of the file at path.
func lastLines(path string, k int) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > k {
			lines = lines[1:]
		}
	}
	return lines
}

// signal sends sig to n's running process, noting why it will end (cause,
// or "" for a signal that does not end it); errNotRunning if there is none.
func (n *dbNode) signal(sig syscall.Signal, cause string, want nodeState) (*exec.Cmd, chan struct{}, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.state == crashed {
		return nil, nil, fmt.Errorf("%s: %w", n.id, errNotRunning)
	}
	if cause != "" {
		n.expect = cause
	}
	if err := n.cmd.Process.Signal(sig); err != nil {
		return nil, nil, fmt.Errorf("%s: signal %s: %w", n.id, sig, err)
	}
	n.state = want
	return n.cmd, n.done, nil
}

// kill sends SIGKILL to node n's process (by PID), waits for it to end,
// and says how it ended. A node that is not running is errNotRunning.
func (d *db) kill(n *dbNode) (string, bool, error) {
	cmd, done, err := n.signal(syscall.SIGKILL, checker.CauseNemesis, killed)
	if err != nil {
		return "", false, err
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		return "", false, fmt.Errorf("%s (pid %d) did not die", n.id, cmd.Process.Pid)
	}
	n.mu.Lock()
	r := n.runs[len(n.runs)-1]
	n.mu.Unlock()
	if r.Signal != "killed" {
		return fmt.Sprintf("%s ended with %s before SIGKILL", n.id, r.How()), false, nil
	}
	return n.id + " killed by SIGKILL", true, nil
}

// pause stops node n's process with SIGSTOP and checks in /proc that the
// kernel has stopped it.
func (d *db) pause(n *dbNode) (string, bool, error) {
	cmd, _, err := n.signal(syscall.SIGSTOP, "", paused)
	if err != nil {
		return "", false, err
	}
	pid := cmd.Process.Pid
	deadline := time.Now().Add(2 * time.Second)
	for {
		st, err := procState(pid)
		if err == nil && (st == "T" || st == "t") {
			return fmt.Sprintf("%s stopped (state %s)", n.id, st), true, nil
		}
		if time.Now().After(deadline) {
			return fmt.Sprintf("%s not stopped after SIGSTOP (state %q, %v)", n.id, st, err), false, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// procState is the state letter of process pid in /proc/<pid>/stat.
func procState(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	// "pid (comm) S ...": comm may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return "", fmt.Errorf("unreadable stat %q", s)
	}
	return s[i+2 : i+3], nil
}

// resume continues a paused node with SIGCONT.
func (d *db) resume(n *dbNode) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.state != paused {
		return nil
	}
	n.state = running
	return n.cmd.Process.Signal(syscall.SIGCONT)
}

// restore resumes paused nodes and restarts the ones that are down, killed
// or crashed (a crash is on record already, for the nodes checker). A
// restart that fails is on record too; the node then never gets ready, and
// the final reads say so.
func (d *db) restore() error {
	var errs []error
	for _, n := range d.nodes {
		n.mu.Lock()
		st := n.state
		n.mu.Unlock()
		switch st {
		case paused:
			errs = append(errs, d.resume(n))
		case killed, crashed:
			_ = d.start(n)
		}
	}
	return errors.Join(errs...)
}

// stop ends every node: SIGCONT and SIGTERM; past grace, SIGQUIT (the Go
// runtime writes every goroutine's stack to the node's log, to show where
// the shutdown hung) and SIGKILL two seconds later. The runs record
// whether each exited cleanly.
func (d *db) stop(grace time.Duration) {
	var wg sync.WaitGroup
	for _, n := range d.nodes {
		n.mu.Lock()
		cmd, done := n.cmd, n.done
		if cmd != nil {
			n.expect, n.state = checker.CauseStop, stopped
			n.runs[len(n.runs)-1].Stopping = d.rec.Now()
		}
		n.mu.Unlock()
		if cmd == nil {
			continue
		}
		wg.Go(func() {
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(grace):
				n.mu.Lock()
				n.expect = checker.CauseStopTimeout
				n.mu.Unlock()
				_ = cmd.Process.Signal(syscall.SIGQUIT)
				select {
				case <-done:
				case <-time.After(2 * time.Second):
					_ = cmd.Process.Signal(syscall.SIGKILL)
					<-done
				}
			}
		})
	}
	wg.Wait()
}

// runs returns every node's process records.
func (d *db) runs() []checker.NodeRun {
	var out []checker.NodeRun
	for _, n := range d.nodes {
		n.mu.Lock()
		out = append(out, n.runs...)
		n.mu.Unlock()
	}
	return out
}

// awaitReady polls /readyz on every node until all answer 200 or ctx ends.
func (d *db) awaitReady(ctx context.Context, c *http.Client) error {
	for {
		var notReady []string
		for _, n := range d.nodes {
			if !d.ready(ctx, c, n) {
				notReady = append(notReady, n.id)
			}
		}
		if len(notReady) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nodes not ready: %v: %w", notReady, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// ready reports a node whose /readyz answers 200 and that knows the run's
// admin key (the meta leader installs it just after forming the cluster).
func (d *db) ready(ctx context.Context, c *http.Client, n *dbNode) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	for _, path := range []string{"/readyz", "/api/v1/keys"} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.HTTP()+path, nil)
		req.Header.Set("Authorization", "Bearer "+d.adminKey)
		resp, err := c.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false
		}
	}
	return true
}

// startAll starts every node: one after another, or, with jitter, all at
// once in a random order, each after a random delay below jitter (the
// formation run: the start order and timing are what is under test).
func (d *db) startAll(jitter time.Duration, seed uint64) error {
	if jitter <= 0 {
		for _, n := range d.nodes {
			if err := d.start(n); err != nil {
				return err
			}
		}
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, 0x5ea7))
	errs := make([]error, len(d.nodes))
	var wg sync.WaitGroup
	for _, i := range rng.Perm(len(d.nodes)) {
		delay := time.Duration(rng.Int64N(int64(jitter)))
		wg.Go(func() {
			time.Sleep(delay)
			errs[i] = d.start(d.nodes[i])
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
