package jepsen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/linkraft/linkraft/jepsen/checker"
	"github.com/linkraft/linkraft/jepsen/history"
)

// The backup check (issue 25): halfway through the run, while the clients
// and the faults go on, the harness takes a backup with linknode's own CLI
// (linknode backup) through one node after another until one succeeds.
// After the run it starts a fresh single node on loopback, restores the
// file into it (linknode restore) and reads back every code; the backup
// checker then holds it to what the history says was acknowledged before
// the backup began, and has the restored node issue new codes, none of
// which may be one the first cluster issued.

// backupAttempt bounds one linknode backup of the run's cluster.
const backupAttempt = 30 * time.Second

// restoredIssues is how many codes the restored node is asked to make.
const restoredIssues = 40

// backupTaker takes the run's backup.
type backupTaker struct {
	bin, dir, key string
	nodes         []*dbNode
	rec           *history.Recorder
	logf          func(string, ...any)

	mu   sync.Mutex
	file string // the backup, once one was taken
	errs []string
}

// run waits until at, then tries node after node until a backup is taken
// or the deadline passes.
func (b *backupTaker) run(ctx context.Context, at, deadline time.Time) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(time.Until(at)):
	}
	file := filepath.Join(b.dir, "backup.lrbk")
	for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
		n := b.nodes[i%len(b.nodes)]
		b.rec.Add(history.Op{Process: history.NemesisProcess, Type: history.OK, F: checker.FBackupStart, Node: n.id})
		actx, cancel := context.WithTimeout(ctx, min(backupAttempt, time.Until(deadline)+backupAttempt/2))
		out, err := b.cli(actx, "backup", "-addr", n.Admin(), "-q", "-o", file)
		cancel()
		if err == nil {
			b.rec.Add(history.Op{Process: history.NemesisProcess, Type: history.OK, F: checker.FBackupDone, Node: n.id, Value: strings.TrimSpace(out)})
			b.logf("backup taken through %s: %s", n.id, strings.TrimSpace(out))
			b.mu.Lock()
			b.file = file
			b.mu.Unlock()
			return
		}
		b.rec.Add(history.Op{Process: history.NemesisProcess, Type: history.Fail, F: checker.FBackupDone, Node: n.id, Error: err.Error()})
		b.mu.Lock()
		b.errs = append(b.errs, n.id+": "+err.Error())
		b.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// cli runs linknode NAME ARGS with the run's admin key, returning stdout,
// or an error carrying stderr.
func (b *backupTaker) cli(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, b.bin, append([]string{name}, args...)...)
	cmd.Env = append(os.Environ(), "LINKNODE_KEY="+b.key)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 400 {
			msg = msg[:400] + "…"
		}
		return stdout.String(), fmt.Errorf("linknode %s: %w: %s", name, err, msg)
	}
	return stdout.String(), nil
}

// restoreCheck restores the backup (if one was taken) into a fresh node on
// loopback and reads back codes: what the backup checker judges.
func (b *backupTaker) restoreCheck(ctx context.Context, cl *client, codes []string, adminKeyFile string) *checker.BackupState {
	b.mu.Lock()
	st := &checker.BackupState{File: b.file, Errors: b.errs}
	b.mu.Unlock()
	if st.File == "" {
		return st
	}
	ports, err := freePorts(4)
	if err != nil {
		st.RestoreError = err.Error()
		return st
	}
	host := "127.0.0.1"
	addr := func(i int) string { return net.JoinHostPort(host, strconv.Itoa(ports[i])) }
	dir := filepath.Join(b.dir, "restored")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		st.RestoreError = err.Error()
		return st
	}
	logf, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		st.RestoreError = err.Error()
		return st
	}
	defer logf.Close()
	cmd := exec.Command(b.bin, "-node-id", "restored", "-data-dir", filepath.Join(dir, "data"),
		"-http-addr", addr(0), "-admin-addr", addr(1), "-raft-addr", addr(2), "-gossip-addr", addr(3),
		"-public-url", "http://"+addr(0), "-code-mode", "sequential", "-admin-key-file", adminKeyFile, "-fast-raft")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		st.RestoreError = err.Error()
		return st
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	defer func() {
		// Ours, by PID: a graceful stop, then a kill.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(stopGrace):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	base, admin := "http://"+addr(0), "http://"+addr(1)
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := awaitURL(rctx, cl.http, base+"/readyz", exited); err != nil {
		st.RestoreError = fmt.Sprintf("the fresh node never became ready: %v (see %s/log)", err, dir)
		return st
	}
	out, err := b.cli(rctx, "restore", "-addr", admin, "-q", st.File)
	st.Restore = strings.TrimSpace(out)
	if err != nil {
		st.RestoreError = err.Error()
		return st
	}
	b.logf("restored into a fresh node: %s; reading back %d codes", st.Restore, len(codes))
	st.Resolves = resolveOn(rctx, cl, base, codes, 16)
	for i := 0; i < restoredIssues && rctx.Err() == nil; i++ {
		r := cl.create(rctx, base, fmt.Sprintf("https://example.com/restored/%d", i), "")
		if r.typ == history.OK {
			st.Issued = append(st.Issued, r.op.Key)
		} else {
			st.IssueErrors++
		}
	}
	return st
}

// backupCodes are the codes the backup checker reads on the restored node
// before it makes new ones: every acknowledged create's, and every code a
// node of the first cluster stored (the backup may hold any of them).
func backupCodes(ops []history.Op, listed map[string][]checker.Listed) []string {
	seen := map[string]bool{}
	var codes []string
	add := func(c string) {
		if c != "" && !seen[c] {
			seen[c] = true
			codes = append(codes, c)
		}
	}
	for _, op := range ops {
		if op.Type == history.OK && op.F == checker.FCreate && op.Process != history.NemesisProcess {
			add(op.Key)
		}
	}
	for _, links := range listed {
		for _, l := range links {
			add(l.Code)
		}
	}
	slices.Sort(codes)
	return codes
}

// awaitURL polls url until it answers 200, the process exits or ctx ends.
func awaitURL(ctx context.Context, c *http.Client, url string, exited <-chan struct{}) error {
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-exited:
			return errors.New("the process exited")
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// freePorts returns k loopback ports free a moment ago.
func freePorts(k int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var ports []int
	for range k {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
