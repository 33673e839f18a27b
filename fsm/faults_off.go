//go:build !jepsenbugs

package fsm

import bolt "go.etcd.io/bbolt"

// The fsm's hooks for the chaos harness's deliberate faults (faults_on.go,
// in jepsenbugs builds only): in this build they do nothing and compile
// away.

func faultBeforePut(*bolt.Tx, string) error { return nil }

func faultReuseTombstone() bool { return false }
