//go:build !jepsenbugs

package main

import "context"

// faultExitOnce is the hook of the chaos harness's exit-once fault
// (faults_on.go, in jepsenbugs builds only): here it does nothing.
func faultExitOnce(context.Context, string) {}
