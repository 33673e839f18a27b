//go:build !jepsenbugs

package httpapi

// faultPanic is the fast path's hook for the chaos harness's panic-once
// fault (faults_on.go, in jepsenbugs builds only): here it does nothing.
func faultPanic() {}
