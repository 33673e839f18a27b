package apikey

import (
	"fmt"
	"os"
	"strings"

	"github.com/linkraft/linkraft/internal/atomicfile"
)

// LoadSecret reads a secret from a file (one line). A file every local
// user may read is refused, as for the cluster key.
func LoadSecret(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("key file: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("key file %s: mode %v lets other users (its group or everyone) read it; chmod 600 it, owned by the user linknode runs as", path, st.Mode().Perm())
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

// SaveSecret writes secret to path (mode 0600) durably
// (internal/atomicfile).
func SaveSecret(path, secret string) error {
	return atomicfile.Write(path, []byte(secret+"\n"), 0o600)
}
