//go:build !jepsenbugs

package raftgroup

// The group's hook for the chaos harness's deliberate faults (faults_on.go,
// in jepsenbugs builds only): in this build it does nothing.

func faultLogNoSync() bool { return false }
