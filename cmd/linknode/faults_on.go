//go:build jepsenbugs

package main

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/linkraft/linkraft/internal/bugs"
)

// faultExitOnce is the chaos harness's exit-once fault (internal/bugs):
// ten seconds after the first start on a data dir, the process exits with
// status 3 and no log line, as a crash that leaves no trace would.
func faultExitOnce(ctx context.Context, dataDir string) {
	if !bugs.On(bugs.ExitOnce) {
		return
	}
	marker := filepath.Join(dataDir, "jepsen-exit-once")
	if _, err := os.Stat(marker); err == nil {
		return
	}
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		return
	}
	go func() {
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			os.Exit(3)
		}
	}()
}
