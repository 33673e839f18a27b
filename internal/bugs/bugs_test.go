//go:build !jepsenbugs

package bugs

import "testing"

// A normal build has no faults, whatever the environment says.
func TestOffBuildHasNoFaults(t *testing.T) {
	t.Setenv(Env, "early-ack,panic-once")
	for _, name := range All {
		if On(name) || Once(name) || Every(name, 1) {
			t.Fatalf("%s is on in a build without the jepsenbugs tag", name)
		}
	}
}
