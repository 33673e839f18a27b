//go:build !jepsenbugs

package shard

// The shard's hook for the chaos harness's deliberate faults (faults_on.go,
// in jepsenbugs builds only): in this build it does nothing.

func faultNoInvalidate() bool { return false }
