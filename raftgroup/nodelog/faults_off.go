//go:build !jepsenbugs

package nodelog

// The log's hook for the chaos harness's deliberate faults (faults_on.go,
// in jepsenbugs builds only): in this build it does nothing.

func faultNoSync() bool { return false }
