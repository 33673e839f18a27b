package apikey

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// LoadSecret reads a secret from a file (one line). A file every local
// user may read is refused, as for the cluster key.
func LoadSecret(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("key file: %w", err)
	}
	if st.Mode().Perm()&0o007 != 0 {
		return "", fmt.Errorf("key file %s: mode %v lets every local user read it; chmod 600 it", path, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("key file: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if err := ValidSecret(s); err != nil {
		return "", fmt.Errorf("key file %s: %w", path, err)
	}
	return s, nil
}

// SaveSecret writes secret to path (mode 0600) durably: a temporary file,
// fsynced and renamed over path, and the directory fsynced.
func SaveSecret(path, secret string) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op once renamed
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.WriteString(secret + "\n"); err != nil {
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
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
