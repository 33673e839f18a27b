package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockName is the file in the data dir that a running node holds locked.
const lockName = "linknode.lock"

// dataDirLock is a running node's hold on its data dir.
type dataDirLock struct{ f *os.File }

// lockDataDir makes the data dir if need be, checks that this user may
// write it, and takes an exclusive lock on it (flock, released by the
// kernel when the process ends however it ends), so that a second node on
// the same dir is refused at once, by name, rather than after the bbolt
// files' open timeout with advice meant for a damaged file.
func lockDataDir(dir string) (*dataDirLock, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("-data-dir %s: %w: create it, owned by the user linknode runs as (uid %d), or choose another -data-dir", dir, err, os.Getuid())
	}
	p := filepath.Join(dir, lockName)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrPermission) {
			return nil, fmt.Errorf("-data-dir %s is not writable by this user (uid %d): chown -R it to the user linknode runs as, or choose another -data-dir", dir, os.Getuid())
		}
		return nil, fmt.Errorf("-data-dir %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		pid := make([]byte, 32)
		n, _ := f.ReadAt(pid, 0)
		f.Close()
		holder := "another linknode"
		if s := strings.TrimSpace(string(pid[:n])); s != "" {
			holder += " (pid " + s + ")"
		}
		return nil, fmt.Errorf("-data-dir %s is in use by %s: stop it first, or give this node its own -data-dir", dir, holder)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dataDirLock{f: f}, nil
}

// unlock lets the data dir go (the file stays: removing it would race a
// node starting on the same dir).
func (l *dataDirLock) unlock() {
	if l != nil && l.f != nil {
		_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
		_ = l.f.Close()
	}
}
