//go:build !jepsencrash

package crashpoint

import (
	"os"
	"path/filepath"
	"testing"
)

// TestOffBuildHasNoPoints: without the jepsencrash tag, an arming file and
// Listen arm nothing, and every point is passed through.
func TestOffBuildHasNoPoints(t *testing.T) {
	arm := filepath.Join(t.TempDir(), "arm")
	if err := os.WriteFile(arm, []byte(StatePending), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(Env, arm)
	Listen(nil)
	for _, p := range Points {
		Hit(p) // returns: the test goes on
	}
	if Built {
		t.Fatal("Built in a build without the jepsencrash tag")
	}
}
