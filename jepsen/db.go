package jepsen

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/linkraft/linkraft/jepsen/netns"
)

// Ports every node listens on, on its own address.
const (
	httpPort   = 8080
	raftPort   = 7000
	gossipPort = 7946
)

// nodeState is what the nemesis has done to a node's process.
type nodeState int

const (
	running nodeState = iota
	killed
	paused
)

// dbNode is one linknode process.
type dbNode struct {
	index   int
	id      string
	ip      string
	dir     string // node folder in the store: log, data/
	logPath string

	mu    sync.Mutex
	cmd   *exec.Cmd
	done  chan struct{} // closed when cmd exits
	state nodeState
	runs  int
}

// HTTP is the node's base URL.
func (n *dbNode) HTTP() string { return "http://" + net.JoinHostPort(n.ip, strconv.Itoa(httpPort)) }

// db is the cluster of linknode processes.
type db struct {
	env   *netns.Env
	bin   string
	nodes []*dbNode
	extra []string // extra linknode flags
	envv  []string // extra environment (bug switches)
}

func newDB(env *netns.Env, bin, storeDir string, n int, extra, envv []string) *db {
	d := &db{env: env, bin: bin, extra: extra, envv: envv}
	for i := range n {
		id := fmt.Sprintf("n%d", i+1)
		dir := filepath.Join(storeDir, "nodes", id)
		d.nodes = append(d.nodes, &dbNode{index: i, id: id, ip: env.NodeIP(i).String(), dir: dir, logPath: filepath.Join(dir, "log")})
	}
	return d
}

func (d *db) args(n *dbNode) []string {
	var join []string
	for _, o := range d.nodes {
		join = append(join, net.JoinHostPort(o.ip, strconv.Itoa(gossipPort)))
	}
	args := []string{
		"-node-id", n.id,
		"-data-dir", filepath.Join(n.dir, "data"),
		"-http-addr", net.JoinHostPort(n.ip, strconv.Itoa(httpPort)),
		"-raft-addr", net.JoinHostPort(n.ip, strconv.Itoa(raftPort)),
		"-gossip-addr", net.JoinHostPort(n.ip, strconv.Itoa(gossipPort)),
		"-join", strings.Join(join, ","),
		"-bootstrap-expect", strconv.Itoa(len(d.nodes)),
		"-public-url", n.HTTP(),
		// Sequential codes let the unique-ids checker map a code back to
		// its ID and the lease it came from; the permutation is a
		// bijection, so uniqueness is the same property either way.
		"-code-mode", "sequential",
		"-remote-cache-ttl", staleBound.String(),
	}
	return append(args, d.extra...)
}

// start launches node n (first start or restart on the same data dir).
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
	n.runs++
	fmt.Fprintf(logf, "=== jepsen: start #%d of %s at %s\n", n.runs, n.id, time.Now().UTC().Format(time.RFC3339Nano))
	cmd := d.env.Command(n.index, d.bin, d.args(n)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), d.envv...)
	// Its own process group: a Ctrl-C to the harness does not reach the
	// nodes before the harness has recorded what it needs.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", n.id, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	n.cmd, n.done, n.state = cmd, done, running
	return nil
}

// kill sends SIGKILL to node n's process (by PID) and waits for it to exit.
func (d *db) kill(n *dbNode) error {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) did not die", n.id, cmd.Process.Pid)
	}
	n.mu.Lock()
	n.cmd, n.state = nil, killed
	n.mu.Unlock()
	return nil
}

// pause stops node n's process with SIGSTOP.
func (d *db) pause(n *dbNode) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.state != running {
		return nil
	}
	n.state = paused
	return n.cmd.Process.Signal(syscall.SIGSTOP)
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

// restore resumes paused nodes and restarts killed ones.
func (d *db) restore() error {
	var errs []error
	for _, n := range d.nodes {
		n.mu.Lock()
		st := n.state
		n.mu.Unlock()
		switch st {
		case paused:
			errs = append(errs, d.resume(n))
		case killed:
			errs = append(errs, d.start(n))
		}
	}
	return errors.Join(errs...)
}

// stop ends every node: SIGTERM (after SIGCONT), then SIGKILL past grace.
func (d *db) stop(grace time.Duration) {
	var wg sync.WaitGroup
	for _, n := range d.nodes {
		n.mu.Lock()
		cmd, done := n.cmd, n.done
		n.mu.Unlock()
		if cmd == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(grace):
				_ = cmd.Process.Signal(syscall.SIGKILL)
				<-done
			}
			n.mu.Lock()
			n.cmd = nil
			n.mu.Unlock()
		}()
	}
	wg.Wait()
}

// awaitReady polls /readyz on every node until all answer 200 or ctx ends.
func (d *db) awaitReady(ctx context.Context, c *http.Client) error {
	for {
		var notReady []string
		for _, n := range d.nodes {
			if !ready(ctx, c, n) {
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

func ready(ctx context.Context, c *http.Client, n *dbNode) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.HTTP()+"/readyz", nil)
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
