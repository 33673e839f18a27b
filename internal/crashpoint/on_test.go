//go:build jepsencrash

package crashpoint

import (
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestArmedPointKills: a process arms a point through the file and
// SIGUSR2; Hit of another point does nothing, Hit of the armed point ends
// the process by SIGKILL with its line on stderr; an empty file disarms.
func TestArmedPointKills(t *testing.T) {
	if os.Getenv("CRASHPOINT_CHILD") != "" {
		Listen(slog.New(slog.NewTextHandler(io.Discard, nil)))
		os.Stdout.WriteString("listening\n")
		for {
			Hit(StateCommitted)
			time.Sleep(time.Millisecond)
			if _, err := os.Stat(os.Getenv(Env) + ".go"); err == nil {
				Hit(LogStored)
			}
		}
	}
	armFile := filepath.Join(t.TempDir(), "arm")
	cmd := exec.Command(os.Args[0], "-test.run=^TestArmedPointKills$")
	cmd.Env = append(os.Environ(), "CRASHPOINT_CHILD=1", Env+"="+armFile)
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if _, err := io.ReadFull(stdout, buf); err != nil {
		t.Fatal(err)
	}
	signalArm := func(point string) {
		t.Helper()
		if err := os.WriteFile(armFile, []byte(point), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Process.Signal(syscall.SIGUSR2); err != nil {
			t.Fatal(err)
		}
	}
	// Armed at log-stored, which the child reaches only once told to.
	signalArm(LogStored)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		t.Fatalf("the child ended at a point that was not armed: %v\n%s", err, stderr.String())
	case <-time.After(200 * time.Millisecond):
	}
	if err := os.WriteFile(armFile+".go", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("the child ended with %v, not SIGKILL", err)
		}
		if !strings.Contains(stderr.String(), "crash point log-stored reached") {
			t.Fatalf("stderr: %q", stderr.String())
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the armed point did not crash the child")
	}
}

// TestDisarm: an empty or unknown name leaves nothing armed.
func TestDisarm(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	path := filepath.Join(t.TempDir(), "arm")
	for _, content := range []string{StatePending, "", "no-such-point"} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		arm(log, path)
		got := armed.Load()
		if content == StatePending {
			if got == nil || *got != StatePending {
				t.Fatalf("after %q armed %v", content, got)
			}
			continue
		}
		if got != nil {
			t.Fatalf("after %q armed %q", content, *got)
		}
	}
}
