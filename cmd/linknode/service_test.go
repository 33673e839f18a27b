package main

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSystemdUnitCommandLine runs the command line of deploy/linknode.service
// (its paths and ports moved into the test's) as systemd would with
// Type=notify: the node tells the notification socket READY=1 once it
// serves, logs JSON, passes linknode probe, and on SIGTERM says
// STOPPING=1 and exits 0.
func TestSystemdUnitCommandLine(t *testing.T) {
	t.Parallel()
	unit, err := os.ReadFile(filepath.Join("..", "..", "deploy", "linknode.service"))
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, line := range strings.Split(string(unit), "\n") {
		if rest, ok := strings.CutPrefix(line, "ExecStart="); ok {
			args = strings.Fields(rest)
		}
	}
	if len(args) < 2 || args[0] != "/usr/local/bin/linknode" || !strings.Contains(string(unit), "Type=notify") {
		t.Fatalf("the unit's ExecStart: %q", args)
	}
	dir := t.TempDir()
	a := newAddrs(t)
	for i := 1; i < len(args); i++ {
		switch args[i-1] {
		case "-data-dir":
			args[i] = filepath.Join(dir, "data")
		case "-http-addr":
			args[i] = a.http
		case "-admin-addr":
			args[i] = a.admin
		}
	}
	args = append(args[1:], "-raft-addr", a.raft, "-gossip-addr", a.gossip, "-fast-raft")

	sock := filepath.Join(dir, "notify.sock")
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	logPath := filepath.Join(dir, "linknode.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(binary(t), args...)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	defer func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill() // only the process this test started
			<-exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("log:\n%s", b)
		}
	}()
	read := func(want string) {
		t.Helper()
		buf := make([]byte, 256)
		_ = ln.SetReadDeadline(time.Now().Add(60 * time.Second))
		n, err := ln.Read(buf)
		if err != nil || string(buf[:n]) != want {
			t.Fatalf("notification %q, %v; want %q", buf[:n], err, want)
		}
	}
	read("READY=1")
	var probeErr strings.Builder
	if code := runProbe([]string{"-url", "http://" + a.http + "/readyz", "-timeout", "10s"}, &probeErr); code != 0 {
		t.Fatalf("linknode probe of a ready node: %d %s", code, probeErr.String())
	}
	if code := runProbe([]string{"-url", "http://" + a.http + "/no-such-page"}, &probeErr); code != 1 {
		t.Fatalf("linknode probe of a 404: %d", code)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	read("STOPPING=1")
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("exit after SIGTERM: %v", waitErr)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no exit 60 s after SIGTERM")
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	// A healthy start and stop says a handful of things, none a warning.
	info := 0
	for line := range strings.Lines(string(b)) {
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil || entry["msg"] == nil {
			t.Fatalf("-log-format json logged %q (%v)", line, err)
		}
		switch entry["level"] {
		case "INFO":
			info++
		case "WARN", "ERROR":
			t.Errorf("a healthy node logged %s", line)
		}
	}
	if info > 12 {
		t.Errorf("a healthy start and stop logged %d INFO lines:\n%s", info, b)
	}
}

// TestKeygenKeep: keygen -o never replaces a key, unless told to keep it,
// which exits 0 and leaves both files as they were.
func TestKeygenKeep(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key, admin := filepath.Join(dir, "cluster.key"), filepath.Join(dir, "admin.key")
	var out, errOut strings.Builder
	if code := runKeygen([]string{"-o", key, "-admin-o", admin, "-keep"}, &out, &errOut); code != 0 {
		t.Fatalf("first keygen: %d %s", code, errOut.String())
	}
	k1, _ := os.ReadFile(key)
	a1, _ := os.ReadFile(admin)
	if st, err := os.Stat(admin); err != nil || st.Mode().Perm() != 0o600 || !strings.HasPrefix(string(a1), "lrk_") {
		t.Fatalf("admin key file: %v %v %q", st, err, a1)
	}
	if code := runKeygen([]string{"-o", key, "-admin-o", admin, "-keep"}, &out, &errOut); code != 0 {
		t.Fatalf("keygen -keep again: %d %s", code, errOut.String())
	}
	k2, _ := os.ReadFile(key)
	a2, _ := os.ReadFile(admin)
	if string(k1) != string(k2) || string(a1) != string(a2) {
		t.Fatal("keygen -keep replaced a key")
	}
	if code := runKeygen([]string{"-o", key}, &out, &errOut); code != 1 {
		t.Fatalf("keygen over an existing key: %d", code)
	}
}
