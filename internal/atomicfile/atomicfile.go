// Package atomicfile writes small files durably and all at once: a crash
// leaves either the old file or the new one, never a part.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write puts data in path with mode perm: a temporary file in the same
// directory, fsynced, renamed over path, and the directory fsynced.
func Write(path string, data []byte, perm os.FileMode) error {
	return put(path, data, perm, os.Rename)
}

// Create is Write for a file that must not exist yet: it fails with an
// error wrapping os.ErrExist, and leaves the file there as it was, if
// path exists (the temporary file is linked to path, which never
// replaces).
func Create(path string, data []byte, perm os.FileMode) error {
	return put(path, data, perm, os.Link)
}

// put writes data to a temporary file beside path, fsynced, publishes it
// as path, and fsyncs the directory.
func put(path string, data []byte, perm os.FileMode, publish func(tmp, path string) error) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op once renamed
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := publish(tmp, path); err != nil {
		return err
	}
	return SyncDir(dir)
}

// SyncDir fsyncs directory dir, so that a file created, renamed or removed
// in it stays so after a crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
