// Package tmpfs gives tests a small file system of their own, to run a
// state file or a whole node's data dir out of space. Mounting needs root:
// the tests that use it run in CI, which runs as root.
package tmpfs

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// Mount mounts a tmpfs of size (mount's syntax: "4m") on a new temporary
// directory, unmounted at the end of the test, and returns the directory.
func Mount(tb testing.TB, size string) string {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Fatal("this test mounts a tmpfs and must run as root (CI does)")
	}
	dir := tb.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0750", "tmpfs", dir).CombinedOutput(); err != nil {
		tb.Fatalf("mount tmpfs: %v: %s", err, out)
	}
	tb.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// Fill writes a file in dir until the file system has at most leave bytes
// free, and returns its path; removing it gives the space back.
func Fill(tb testing.TB, dir string, leave int64) string {
	tb.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err != nil {
			tb.Fatal(err)
		}
		free := int64(st.Bavail) * int64(st.Bsize)
		if free <= leave {
			return p
		}
		n := min(int64(len(buf)), free-leave)
		if _, err := f.Write(buf[:n]); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return p
			}
			tb.Fatal(err)
		}
	}
}
